/**
 * The pi-workflows Pi extension: a live Pi session as a client of the runner.
 *
 * Load it with `pi -e "$(pi-workflows pi-extension)"`. It adds the `workflow`
 * tool (the model starts, lists, inspects, cancels, answers and resumes runs,
 * and submits the in-session agent steps of this session's run, which arrive
 * over conversation.ts), the `/workflow` command (the same for the person, with argument
 * completion), activation of the session's queued run at safe idle
 * boundaries, exactly-once delivery of deferred follow-up turns, a catch-up
 * message when the session opens (and the resumption of the session's parked
 * run when no host runs), and a footer status and per-node widget that follow
 * the session's unfinished run from the store, and the `/controller` command with the
 * footer's count of controller resources not ready (controllers.ts). It talks to the runner through the
 * `pi-workflows` CLI with `--json` (clicall.ts), never through a shell, and to
 * its own runner's worker over the conversation socket, with Pi's session id as `--session` and the
 * session's working directory as `--project`. The Python side owns every
 * durable decision; this file keeps no state that matters after a crash.
 * docs/pi-extension.md describes the behaviour.
 */

import { StringEnum } from "@mariozechner/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { Type } from "typebox";
import { binary, cli, jsonArgs, parse, reason } from "./clicall.ts";
import { CONTROLLERS_KEY, controllerCommand, notReadyText } from "./controllers.ts";
import { CONVERSATION_ENV, ConversationServer, type Delivery } from "./conversation.ts";
import {
	aborted,
	answerJson,
	decisionText,
	type FollowUp,
	footerText,
	output,
	type RunInfo,
	runLine,
	type Snapshot,
	shownState,
	widgetLines,
	type WorkflowList,
} from "./shown.ts";

const CUSTOM_TYPE = "pi-workflows";
const UI_KEY = "pi-workflows";
const POLL_MS = 1000; // progress poll while the session has an unfinished run (parked too)
const WATCH_MS = 1000; // otherwise: a stat of the store's files, a poll only if they changed
const WIDGET_KEEP_MS = Number(process.env.PI_WORKFLOWS_WIDGET_KEEP_MS) || 60_000; // a finished run's widget
const NAMES_TTL_MS = 30_000; // argument completion: workflow names cached this long
const IDLE_RETRY_MS = 25; // agent_end fires before the loop is idle: look again shortly
const IDLE_RETRIES = 200; // about 5 s; after that the next agent_end tries again
const SEEN_WAIT_MS = 5000; // how long a sent follow-up may take to reach the session branch
const ACTIVE = new Set(["queued", "starting", "running"]);
const UNFINISHED = new Set(["queued", "starting", "running", "parked"]);
const VERBS = ["status", "cancel", "pause", "answer", "resume", "watch", "chat"];
const RUN_VERBS = new Set(VERBS);
const REPORTED = new Set(["completed", "waiting", "failed", "timed_out", "cancelled", "parked"]);

export default function (pi: ExtensionAPI) {
	let ctxRef: ExtensionContext | undefined;
	let sessionId = "";
	let cwd = "";
	let activation: ChildProcess | undefined; // the session runner: `activate` or `resume --session`
	let resumeDue = ""; // a parked run of this session to resume here at the next boundary
	const resumeTried = new Set<string>(); // resumed here once already: not again by itself
	let storeFiles: string[] | undefined; // the store's files, for the cheap idle watch
	let storeSeen = "";
	let watchTimer: ReturnType<typeof setTimeout> | undefined;
	let widgetTimer: ReturnType<typeof setTimeout> | undefined;
	let widgetRun = ""; // the run the widget shows
	let names: { at: number; list: string[] } | undefined;
	let settling = false;
	let again = false;
	let closed = false;
	let pollTimer: ReturnType<typeof setTimeout> | undefined;
	let idleTimer: ReturnType<typeof setTimeout> | undefined;
	let nothingFor = ""; // a run `activate` had nothing to do for: not asked again
	let following = ""; // the run the footer follows while it is active
	let catchUpDue = false; // session_start: the next delivery is the catch-up

	// In-session agent steps: the runner this Pi spawns connects here, and its agent
	// steps happen in this conversation (conversation.ts; docs/pi-extension.md).
	const conversation = new ConversationServer({
		sessionId: () => sessionId,
		deliver: (d: Delivery) => {
			// A steer while the agent streams, else a turn of its own; shown to the user
			// as the step message it is.
			pi.sendMessage(
				{ customType: CUSTOM_TYPE, content: d.message, display: true, details: { kind: d.kind, runId: d.runId, step: d.step, attempt: d.attempt } },
				{ triggerTurn: true, deliverAs: "steer" },
			);
		},
		changed: () => void poll(),
	});

	const session = (args: string[]) => [...args, "--session", sessionId, "--project", cwd, "--json"];
	const idle = (ctx: ExtensionContext) => ctx.isIdle() && !ctx.hasPendingMessages();
	const inBranch = (ctx: ExtensionContext, intentId: string) =>
		ctx.sessionManager
			.getBranch()
			.some(
				(e) =>
					e.type === "custom_message" &&
					e.customType === CUSTOM_TYPE &&
					(e.details as { intentId?: string } | undefined)?.intentId === intentId,
			);

	function bind(ctx: ExtensionContext): void {
		ctxRef = ctx;
		sessionId = ctx.sessionManager.getSessionId();
		cwd = ctx.cwd;
	}

	// ---- the safe idle boundary -------------------------------------------------

	/** Settle once the agent is idle with nothing queued; a later agent_end retries. */
	function atIdle(): void {
		if (idleTimer) clearTimeout(idleTimer);
		let tries = 0;
		const look = () => {
			idleTimer = undefined;
			const ctx = ctxRef;
			if (!ctx || closed) return;
			if (idle(ctx)) {
				void settle(ctx);
			} else if (tries++ < IDLE_RETRIES) {
				idleTimer = setTimeout(look, IDLE_RETRY_MS);
			}
		};
		idleTimer = setTimeout(look, 0);
	}

	/** Deliver what the runner has for this session, then activate its queued run. Single flight. */
	async function settle(ctx: ExtensionContext): Promise<void> {
		if (settling) {
			again = true;
			return;
		}
		settling = true;
		try {
			do {
				again = false;
				if (closed || !idle(ctx)) return;
				// `sync` creates the store when there is none, so it runs beside `status` (one
				// process's wait less at every boundary) only once the store is known to exist.
				const file = storeFiles?.[0];
				const syncing = file && fs.existsSync(file) ? cli(session(["sync", "--hold-follow-ups"]), cwd) : undefined;
				const status = await cli(session(["status", "--nodes"]), cwd);
				if (status.code !== 0 && !syncing) return; // no store yet: this project never had a run
				const run = status.code === 0 ? (parse<{ run: RunInfo | null }>(status) ?? { run: null }).run : null;
				const catchUp = catchUpDue;
				// Reopened with the session's own run parked and no host to resume it: this
				// session resumes it (seed 000, acceptance 2). The claim decides against a host
				// or another Pi that starts meanwhile; never both run it.
				if (
					catchUp &&
					run?.queueState === "parked" &&
					!run.errorCode &&
					run.hostRunning === false &&
					run.sessionRole === "origin" &&
					!resumeTried.has(run.runId)
				)
					resumeDue = run.runId;
				const snapshot = parse<Snapshot>(await (syncing ?? cli(session(["sync", "--hold-follow-ups"]), cwd)));
				if (snapshot) catchUpDue = false;
				// What a sync printed counts as shown, so it is delivered even when `status` failed.
				if (snapshot && (await deliver(ctx, snapshot, catchUp))) return; // a model turn runs now
				if (status.code !== 0) return; // the session's run is unknown: nothing to activate
				if (closed || !idle(ctx)) return;
				if (resumeDue) resumeHere(ctx);
				else activate(ctx, run);
			} while (again);
		} finally {
			settling = false;
			// A boundary that came while this settle ran (the end of the turn a follow-up
			// started, say) is looked at again rather than lost.
			if (again) atIdle();
			if (activation || following) void poll();
			else watch();
		}
	}

	/** Show a snapshot: one quiet report, then each follow-up exactly once. True if a turn started. */
	async function deliver(ctx: ExtensionContext, snap: Snapshot, catchUp: boolean): Promise<boolean> {
		// A presentation (issue 22, item 7) is hidden: its run keeps its visible report.
		const hidden = (f: FollowUp) => (f as FollowUp & { hidden?: boolean }).hidden === true;
		const followed = new Set(snap.followUps.filter((f) => !hidden(f)).map((f) => f.runId));
		const runs = snap.runs.filter(
			(r) => !followed.has(r.runId) && REPORTED.has(r.change ?? "") && (catchUp || r.mine),
		);
		const notes = snap.notifications.map((n) => `[${n.kind}] ${n.workflow ?? "?"} (${n.runId}): ${n.message ?? ""}`);
		if (runs.length || notes.length) {
			const title = catchUp ? "pi-workflows: while this session was away" : "pi-workflows:";
			pi.sendMessage({
				customType: CUSTOM_TYPE,
				content: [title, ...runs.map((r) => `- ${runLine(r, r.runId === resumeDue)}`), ...notes.map((n) => `- ${n}`)].join("\n"),
				display: true,
				details: { kind: "report", runIds: runs.map((r) => r.runId) },
			});
		}
		let turned = false;
		for (const f of snap.followUps) {
			if (!f.token) continue;
			if (!inBranch(ctx, f.intentId)) {
				// The branch check above is what makes a crash between this send and the
				// resolve below harmless: the next delivery finds the entry and only resolves.
				const kind = (f as FollowUp & { kind?: string }).kind;
				pi.sendMessage(
					{ customType: CUSTOM_TYPE, content: f.message, display: !hidden(f), details: { intentId: f.intentId, runId: f.runId, kind } },
					{ triggerTurn: true, deliverAs: "followUp" },
				);
				turned = true;
				const deadline = Date.now() + SEEN_WAIT_MS;
				while (!inBranch(ctx, f.intentId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
				if (!inBranch(ctx, f.intentId)) continue; // the lease runs out; the next sync offers it again
			}
			await cli(["resolve-follow-up", f.intentId, "--token", f.token, "--project", cwd, "--json"], cwd);
		}
		return turned;
	}

	/** Launch `activate` for the session's queued run: the session runner, tied to this Pi. */
	function activate(ctx: ExtensionContext, run: RunInfo | null): void {
		if (activation) return;
		if (run && ACTIVE.has(run.queueState)) {
			show(ctx, run);
			following = run.runId;
		}
		if (!run || !["queued", "starting"].includes(run.queueState) || run.runId === nothingFor) return;
		if (activation || closed || !idle(ctx)) return;
		spawnRunner(["activate", "--session", sessionId, "--park-on-eof", "--project", cwd], (code) => {
			if (code === 0) nothingFor = run.runId; // done, or nothing to do: no second try for it
		});
	}

	/** Resume the session's parked run here: `resume RUN --session S`, tied to this Pi like `activate`. */
	function resumeHere(ctx: ExtensionContext): void {
		const runId = resumeDue;
		if (activation || closed || !idle(ctx)) return;
		resumeDue = "";
		resumeTried.add(runId);
		following = runId;
		spawnRunner(["resume", runId, "--session", sessionId, "--park-on-eof", "--project", cwd], () => undefined);
	}

	/** The session runner as a child: its own group, stdin a pipe from this Pi (the lifeline). */
	function spawnRunner(args: string[], exited: (code: number | null) => void): void {
		const env = { ...process.env };
		if (conversation.address) env[CONVERSATION_ENV] = conversation.address;
		else delete env[CONVERSATION_ENV];
		const child = spawn(binary(), args, {
			cwd,
			env,
			detached: true, // its own group: only our SIGTERM or the closed pipe parks it
			stdio: ["pipe", "ignore", "ignore"],
		});
		activation = child;
		child.on("error", () => undefined); // exit follows
		child.on("exit", (code) => {
			if (activation === child) activation = undefined;
			exited(code);
			atIdle();
			void poll();
		});
		void poll();
	}

	// ---- progress ---------------------------------------------------------------

	let polling = false;
	let pollAgain = false; // asked while a poll was in flight: that one read too early
	let epoch = 0; // bumped by whatever changes what a poll should see (an answer, a resume)
	async function poll(): Promise<void> {
		if (closed) return;
		if (polling) {
			pollAgain = true;
			return;
		}
		if (pollTimer) {
			clearTimeout(pollTimer);
			pollTimer = undefined;
		}
		if (watchTimer) {
			clearTimeout(watchTimer);
			watchTimer = undefined;
		}
		polling = true;
		try {
			await pollOnce();
		} finally {
			polling = false;
		}
		if (pollAgain) {
			pollAgain = false;
			if (pollTimer) clearTimeout(pollTimer);
			pollTimer = undefined;
			void poll();
		}
	}

	async function pollOnce(): Promise<void> {
		const ctx = ctxRef;
		if (!ctx) return;
		const asked = epoch;
		const seen = storeStamp();
		const result = await cli(session(["status", "--nodes"]), cwd);
		const out = parse<{ run: RunInfo | null; controllersNotReady?: number }>(result) ?? { run: null };
		const run = out.run;
		if (closed) return;
		if (asked !== epoch) {
			pollAgain = true; // read before an answer or a resume: poll again
			return;
		}
		storeSeen = seen;
		show(ctx, run);
		// The same answer counts the controller resources not ready: no process of its own.
		ctx.ui.setStatus(CONTROLLERS_KEY, notReadyText(out.controllersNotReady));
		if (activation || (run && UNFINISHED.has(run.queueState))) {
			if (run) following = run.runId;
			pollTimer = setTimeout(() => {
				pollTimer = undefined;
				void poll();
			}, POLL_MS);
			return;
		}
		if (following) {
			following = "";
			atIdle(); // it just ended: its result goes into the conversation
		}
		watch();
	}

	/** Nothing unfinished: look at the store's files every second, poll only when they changed
	 * (a run started elsewhere for this session, say). A stat, no process. */
	/** Look up the store's files once: the idle watch stats them, and settle() runs sync beside status once the store exists. */
	function learnStore(): void {
		if (storeFiles !== undefined) return;
		storeFiles = [];
		void cli(["paths", "--project", cwd, "--json"], cwd).then((r) => {
			const file = parse<{ storeFile?: string }>(r)?.storeFile;
			storeFiles = file ? [file, `${file}-wal`] : [];
			storeSeen = storeStamp();
		});
	}

	function watch(): void {
		if (closed || watchTimer || pollTimer) return;
		learnStore();
		watchTimer = setTimeout(() => {
			watchTimer = undefined;
			if (closed) return;
			if (storeFiles?.length && storeStamp() !== storeSeen) void poll();
			else watch();
		}, WATCH_MS);
	}

	function storeStamp(): string {
		return (storeFiles ?? [])
			.map((f) => {
				try {
					const st = fs.statSync(f);
					return `${st.mtimeMs}:${st.size}`;
				} catch {
					return "-";
				}
			})
			.join("|");
	}

	function show(ctx: ExtensionContext, run: RunInfo | null): void {
		if (!run) {
			ctx.ui.setStatus(UI_KEY, undefined);
			ctx.ui.setWidget(UI_KEY, undefined);
			return;
		}
		const held = conversation.current?.held && conversation.current.runId === run.runId ? " held: /workflow resume delivers the step again" : "";
		ctx.ui.setStatus(UI_KEY, footerText(run, held));
		if (widgetTimer) clearTimeout(widgetTimer);
		widgetTimer = undefined;
		if (UNFINISHED.has(run.queueState)) {
			widgetRun = run.runId;
			ctx.ui.setWidget(UI_KEY, widgetLines(run));
			return;
		}
		// A finished run's widget stays WIDGET_KEEP_MS after it finished, then goes.
		const left = (run.finishedAt ?? Date.now()) + WIDGET_KEEP_MS - Date.now();
		if (left <= 0) {
			if (widgetRun) ctx.ui.setWidget(UI_KEY, undefined);
			widgetRun = "";
			return;
		}
		widgetRun = run.runId;
		ctx.ui.setWidget(UI_KEY, widgetLines(run));
		widgetTimer = setTimeout(() => {
			widgetTimer = undefined;
			if (!closed && widgetRun === run.runId) {
				widgetRun = "";
				ctx.ui.setWidget(UI_KEY, undefined);
			}
		}, left);
	}

	// ---- actions shared by the tool and the command ------------------------------

	async function start(workflow: string, input: string, byAgent = false): Promise<{ runId: string; workflow: string }> {
		const { args, cleanup } = jsonArgs(input, "--input-json", "--input-file");
		try {
			// --by-agent: the model started it, so a failure after it started gets it one turn.
			const result = await cli(session(["start", workflow, ...args, ...(byAgent ? ["--by-agent"] : [])]), cwd);
			const out = parse<{ runId: string; workflow: string }>(result);
			if (!out) throw new Error(reason(result));
			nothingFor = "";
			return out;
		} finally {
			cleanup();
		}
	}

	async function status(runId?: string): Promise<{ text: string; run: RunInfo | null }> {
		const result = await cli(session(runId ? ["status", runId] : ["status"]), cwd);
		const out = parse<RunInfo & { run?: RunInfo | null }>(result);
		if (!out) throw new Error(reason(result));
		const run = runId ? (out as RunInfo) : (out.run ?? null);
		if (!run) return { text: "This session has no workflow run.", run };
		const detail = (run.error ? ` [${run.errorCode}] ${run.error}` : run.summary ? `: ${run.summary}` : "") + (run.request ? ` ${decisionText(run.request)}` : "");
		const node = run.currentNode ?? run.waitingOn;
		return { text: `Run ${run.runId} (${run.workflow}): ${shownState(run)}${node ? ` at ${node}` : ""}${detail}`, run };
	}

	async function cancel(runId: string, byAgent = false): Promise<string> {
		// --by-agent: the model cancelled it, so once it has ended it gets one turn (a person's cancel: none).
		const by = byAgent ? ["--session", sessionId, "--by-agent"] : [];
		const result = await cli(["cancel", runId, ...by, "--project", cwd, "--json"], cwd);
		const out = parse<{ runId: string; state: string; stopped: boolean }>(result);
		if (!out) throw new Error(reason(result));
		void poll();
		return out.stopped ? `Run ${out.runId} is ${out.state}.` : `Run ${out.runId}: cancel requested.`;
	}

	/** Pause RUN at its next node boundary (`pi-workflows pause`); `resume` continues it. */
	async function pause(runId: string): Promise<string> {
		// --no-wait: the step in progress may run for minutes; the footer follows the pause.
		const result = await cli(["pause", runId, "--project", cwd, "--json", "--no-wait"], cwd);
		const out = parse<{ runId: string; paused: boolean; pauseRequested: boolean; runStatus?: string | null }>(result);
		if (!out) throw new Error(reason(result));
		void poll();
		if (out.paused) return `Run ${out.runId} is paused; resume it with \`/workflow resume ${out.runId}\`.`;
		if (out.pauseRequested)
			return `Run ${out.runId}: pause requested; the step in progress finishes, then the run holds until \`/workflow resume ${out.runId}\`.`;
		return `Run ${out.runId} ended (${out.runStatus ?? "settled"}) before the pause took effect.`;
	}

	async function answer(runId: string, text: string): Promise<string> {
		const result = await cli(session(["answer", runId, "--input-json", answerJson(text)]), cwd);
		const out = parse<{ runId: string; workflow: string; choice?: string }>(result);
		if (!out) throw new Error(reason(result)); // an answer a decision does not take: the CLI's one line
		following = out.runId; // its end is reported, however fast the host is
		epoch++;
		void poll();
		const host = /no host is running/.test(result.stderr) ? " No host is running: start one with `pi-workflows host --background`." : "";
		const chose = out.choice ? ` with ${out.choice}` : "";
		return `Answered ${runId}${chose}; continuation ${out.runId} (${out.workflow}) is queued for the host.${host}`;
	}

	/** This session's unfinished run, for `cancel` without a run id. */
	async function sessionRun(): Promise<RunInfo> {
		const { run } = await status();
		if (!run || !UNFINISHED.has(run.queueState)) throw new Error("This session has no unfinished run.");
		return run;
	}

	async function list(offset: number, limit: number): Promise<{ text: string; runs: RunInfo[] }> {
		const args = ["list", "--project", cwd, "--json", "--limit", String(limit), "--offset", String(offset)];
		const result = await cli(args, cwd);
		const out = parse<{ runs: RunInfo[] }>(result);
		if (!out) throw new Error(reason(result));
		if (!out.runs.length) return { text: offset ? `No runs after the first ${offset}.` : "This project has no runs.", runs: [] };
		const lines = out.runs.map((r) => {
			const node = r.currentNode ?? r.waitingOn;
			return `${r.runId}  ${r.workflow}  ${shownState(r)}${node ? ` at ${node}` : ""}`;
		});
		const more = out.runs.length === limit ? ` (more: offset ${offset + limit})` : "";
		return { text: `Runs ${offset + 1}-${offset + out.runs.length}, newest first${more}:\n${lines.join("\n")}`, runs: out.runs };
	}

	/** Resume parked RUN: a running host takes it; without one, this session resumes it at the next idle boundary. */
	async function resume(runId: string): Promise<string> {
		const result = await cli(["status", runId, "--project", cwd, "--json"], cwd);
		const run = parse<RunInfo>(result);
		if (!run) throw new Error(reason(result));
		if (run.queueState !== "parked") throw new Error(`run ${run.runId} is ${shownState(run)}; only a parked run can be resumed`);
		following = run.runId;
		epoch++;
		if (run.hostRunning || run.errorCode) {
			// A blocked run is unblocked by `resume` itself (or refused with its reason).
			const poked = await cli(["resume", run.runId, "--project", cwd, "--json"], cwd);
			if (poked.code !== 0) throw new Error(reason(poked));
			if (run.hostRunning) {
				void poll();
				return `Run ${run.runId} will be resumed by the running host.`;
			}
		}
		resumeDue = run.runId;
		resumeTried.delete(run.runId);
		atIdle();
		return `Run ${run.runId} resumes in this session at ${run.currentNode ?? "its interrupted node"} (no host is running).`;
	}

	/** The project's workflows (and the files that fail to load), for the list and completion. */
	async function workflows(): Promise<WorkflowList> {
		const result = await cli(["workflows", "--project", cwd, "--json"], cwd);
		const out = parse<WorkflowList>(result);
		if (!out) throw new Error(reason(result));
		names = { at: Date.now(), list: out.workflows.map((w) => w.name) };
		return out;
	}

	/** `/workflow PATH`: the name of the project's (or the global) workflow at PATH. */
	async function nameAt(file: string): Promise<string> {
		const want = fs.existsSync(path.resolve(cwd, file)) ? fs.realpathSync(path.resolve(cwd, file)) : path.resolve(cwd, file);
		const real = (p?: string) => (p && fs.existsSync(p) ? fs.realpathSync(p) : p);
		const out = await workflows();
		const found = out.workflows.find((w) => real(w.path) === want);
		if (found) return found.name;
		const broken = (out.errors ?? []).find((e) => real(e.path) === want);
		if (broken) throw new Error(`${file} does not load: ${broken.error}`);
		throw new Error(`${file} is not one of this project's workflows (they live in .pi/workflows/NAME.workflow.py or the global directory; \`pi-workflows workflows\` lists them)`);
	}

	// ---- the tool -------------------------------------------------------------------

	pi.registerTool({
		name: "workflow",
		label: "Workflow",
		description:
			"Run durable pi-workflows workflows for this session. action `start` queues a run of `workflow` (with `task` words or `inputJson`) and returns its run id; it starts after your turn ends and its result or failure comes back to you. action `status` shows a run (`runId`, or this session's run), `list` lists the project's runs newest first (`offset`, `limit`), `cancel` cancels `runId` (default: this session's unfinished run), `pause` holds `runId` (default: this session's unfinished run) at its next node boundary until `resume`, `answer` answers the checkpoint of waiting run `runId` with `answer` (JSON text such as {\"approved\": true} is passed as JSON), `resume` resumes parked run `runId` (a running host takes it, else this session after your turn). When a workflow step message of this session's run arrives in the conversation, do the step and hand in its result with action `submit` (`step`, `attempt` and `output` as the message says); `update` reports progress with a short `update` text, or `{\"progress\": {\"done\": 3, \"total\": 10}, \"message\": \"...\"}`.",
		promptSnippet: "Start, inspect, cancel or answer durable pi-workflows runs",
		promptGuidelines: [
			"Use the workflow tool with action start to launch a workflow; it runs after your turn, so do not claim it has finished. If it fails to start, or fails after it started, or stops after you cancel it, you get one follow-up message: correct the cause before you start it again.",
			"When a pi-workflows step message arrives, do that step and call the workflow tool with action submit, its step and attempt, and your result as output; if the submission is rejected, read the reason, fix the result and submit again.",
		],
		parameters: Type.Object({
			action: StringEnum(["start", "status", "list", "cancel", "pause", "answer", "resume", "submit", "update"] as const),
			workflow: Type.Optional(Type.String({ description: "start: the workflow name" })),
			task: Type.Optional(Type.String({ description: "start: the task; becomes the input {\"task\": ...}" })),
			inputJson: Type.Optional(Type.String({ description: "start: the input as JSON text, instead of task" })),
			runId: Type.Optional(Type.String({ description: "status, cancel, answer, resume: the run id" })),
			answer: Type.Optional(Type.String({ description: "answer: the answer text, or JSON; a decision takes only one of the answers its report lists (a label, or a label then the text)" })),
			offset: Type.Optional(Type.Integer({ minimum: 0, description: "list: runs to skip (default 0)" })),
			limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: "list: runs to show (default 20)" })),
			step: Type.Optional(Type.String({ description: "submit, update: the step id from the step message" })),
			attempt: Type.Optional(Type.String({ description: "submit, update: the attempt id from the step message" })),
			output: Type.Optional(Type.Unknown({ description: "submit: the step's result (JSON)" })),
			update: Type.Optional(
				Type.Union(
					[
						Type.String({ description: "a short progress message" }),
						Type.Object({
							progress: Type.Optional(
								Type.Object({
									done: Type.Number({ description: "how many are done" }),
									total: Type.Optional(Type.Number({ description: "how many there are in all" })),
									unit: Type.Optional(Type.String({ description: "what is counted, such as files" })),
									message: Type.Optional(Type.String()),
								}),
							),
							message: Type.Optional(Type.String({ description: "a short progress message" })),
						}),
					],
					{ description: 'update: a short progress message, or {"progress": {"done": 3, "total": 10}, "message": "..."}' },
				),
			),
		}),
		async execute(_toolCallId, params, _signal, _onUpdate, ctx) {
			bind(ctx);
			const text = (t: string, details: Record<string, unknown>) => ({ content: [{ type: "text" as const, text: t }], details });
			switch (params.action) {
				case "start": {
					if (!params.workflow) throw new Error("action start needs `workflow`");
					const input = params.inputJson ?? JSON.stringify(params.task ? { task: params.task } : {});
					const out = await start(params.workflow, input, true);
					return text(`Workflow ${out.workflow} queued (run ${out.runId}).`, {
						action: "start",
						workflow: out.workflow,
						runId: out.runId,
						queued: true,
					});
				}
				case "status": {
					const { text: t, run } = await status(params.runId);
					return text(t, { action: "status", run });
				}
				case "list": {
					const { text: t, runs } = await list(params.offset ?? 0, params.limit ?? 20);
					return text(t, { action: "list", runIds: runs.map((r) => r.runId) });
				}
				case "cancel": {
					const runId = params.runId ?? (await sessionRun()).runId;
					return text(await cancel(runId, true), { action: "cancel", runId });
				}
				case "pause": {
					const runId = params.runId ?? (await sessionRun()).runId;
					return text(await pause(runId), { action: "pause", runId });
				}
				case "resume": {
					if (!params.runId) throw new Error("action resume needs `runId`");
					return text(await resume(params.runId), { action: "resume", runId: params.runId });
				}
				case "submit":
				case "update": {
					// Judged by the run's worker exactly as in a headless step; a refusal is this
					// call's error, so the model reads the reason and tries again.
					const verdict = await conversation.call({
						action: params.action,
						step: params.step,
						attempt: params.attempt,
						output: params.output,
						update: params.update,
					});
					if (!verdict.ok) throw new Error(verdict.message);
					return {
						content: [{ type: "text" as const, text: verdict.message }],
						details: { action: params.action, step: params.step, attempt: params.attempt },
						terminate: params.action === "submit",
					};
				}
				case "answer": {
					if (!params.runId || params.answer === undefined) throw new Error("action answer needs `runId` and `answer`");
					return text(await answer(params.runId, params.answer), { action: "answer", runId: params.runId });
				}
			}
			throw new Error(`unknown action ${String(params.action)}`);
		},
	});

	// ---- the command ---------------------------------------------------------------

	const USAGE =
		"/workflow [NAME TASK... | NAME --input-json JSON | PATH | status [RUN] | cancel [RUN] | pause [RUN] | answer RUN TEXT|JSON | resume RUN | watch RUN | chat RUN]";

	pi.registerCommand("workflow", {
		description: "List, start, follow and answer pi-workflows runs of this session",
		getArgumentCompletions: async (prefix: string) => {
			const space = prefix.indexOf(" ");
			const items: { value: string; label: string; description?: string }[] = [];
			if (space < 0) {
				if (!names || Date.now() - names.at > NAMES_TTL_MS) await workflows().catch(() => undefined);
				// A word typed in full is not offered again: Pi's editor would take the offer on
				// Enter instead of running the command the footer tells the user to type.
				for (const v of VERBS) if (v.startsWith(prefix) && v !== prefix) items.push({ value: `${v} `, label: v, description: "subcommand" });
				for (const n of names?.list ?? []) if (n.startsWith(prefix) && n !== prefix) items.push({ value: `${n} `, label: n, description: "workflow" });
			} else {
				const verb = prefix.slice(0, space);
				const part = prefix.slice(space + 1);
				if (!RUN_VERBS.has(verb) || part.includes(" ") || !cwd) return null;
				const out = parse<{ runs: RunInfo[] }>(await cli(["list", "--project", cwd, "--json", "--limit", "20"], cwd));
				for (const r of out?.runs ?? [])
					if (r.runId.startsWith(part) || r.runId.endsWith(part))
						items.push({ value: `${verb} ${r.runId} `, label: r.runId, description: `${r.workflow} ${shownState(r)}` });
			}
			return items.length ? items : null;
		},
		handler: async (args, ctx) => {
			bind(ctx);
			const words = args.trim().split(/\s+/).filter(Boolean);
			const [verb, ...rest] = words;
			const say = (t: string, level: "info" | "warning" | "error" = "info") => ctx.ui.notify(t, level);
			try {
				if (!verb) {
					const out = await workflows();
					const lines = out.workflows.map((w) => `${w.name}${w.description ? ` - ${w.description}` : ""}`);
					const broken = (out.errors ?? []).map((e) => `${e.name} (${e.path}): ${e.error}`);
					const parts = [];
					if (lines.length) parts.push(`Workflows:\n${lines.join("\n")}`);
					if (broken.length) parts.push(`Workflow files that do not load:\n${broken.join("\n")}`);
					if (!lines.length) parts.push(`No workflows in ${cwd}. ${USAGE}`);
					say(parts.join("\n"), broken.length ? "warning" : "info");
				} else if (verb === "status" || verb === "watch") {
					say((await status(rest[0])).text);
					void poll();
				} else if (verb === "cancel") {
					say(await cancel(rest[0] ?? (await sessionRun()).runId));
				} else if (verb === "pause") {
					say(await pause(rest[0] ?? (await sessionRun()).runId));
				} else if (verb === "answer" && rest[0] && rest.length > 1) {
					// The text after the run id as typed (JSON keeps its spaces).
					const after = args.trim().slice(verb.length).trim().slice(rest[0].length).trim();
					say(await answer(rest[0], after));
				} else if (verb === "resume" && conversation.current?.held && (!rest[0] || rest[0] === conversation.current.runId)) {
					const held = conversation.current;
					conversation.redeliver();
					say(`Delivering step ${held.step} of run ${held.runId} again.`);
				} else if (verb === "resume" && rest[0]) {
					say(await resume(rest[0]));
				} else if (verb === "chat" && rest[0]) {
					say(`Continue that run's agent conversation in a terminal: pi-workflows chat ${rest[0]} --project ${cwd}`);
				} else if (RUN_VERBS.has(verb)) {
					say(USAGE, "warning");
				} else {
					const name = verb.includes("/") || verb.endsWith(".py") ? await nameAt(verb) : verb;
					const after = args.trim().slice(verb.length).trim();
					const flag = /^--input-json(=|\s+|$)/.exec(after);
					const input = flag
						? after.slice(flag[0].length).trim()
						: JSON.stringify(rest.length ? { task: rest.join(" ") } : {});
					if (flag && !input) throw new Error("--input-json needs the input as JSON text");
					const out = await start(name, input);
					say(`Workflow ${out.workflow} queued (run ${out.runId}).`);
					atIdle();
				}
			} catch (err) {
				say(err instanceof Error ? err.message : String(err), "error");
			}
		},
	});

	const controllers = controllerCommand({ cwd: () => cwd, changed: () => void poll() });

	pi.registerCommand("controller", {
		description: "List, show, apply, reconcile and delete the resources pi-workflows controllers keep",
		getArgumentCompletions: async (prefix: string) => (cwd ? controllers.complete(prefix) : null),
		handler: async (args, ctx) => {
			bind(ctx);
			const out = await controllers.run(args);
			ctx.ui.notify(out.text, out.level);
		},
	});

	// ---- lifecycle ------------------------------------------------------------------

	pi.on("session_start", async (_event, ctx) => {
		bind(ctx);
		await conversation.start(); // before any runner is spawned, so it can name the socket
		learnStore(); // known by the end of the first turn, whatever the catch-up does
		catchUpDue = true;
		atIdle(); // the catch-up, then activation, once no turn is active
	});

	pi.on("agent_end", async (event, ctx) => {
		bind(ctx);
		// The step's turn ended without an accepted submission: the worker reminds (or
		// fails the step); an aborted turn (Escape) holds it instead.
		if (conversation.current) conversation.settled(aborted(event.messages));
		atIdle();
	});

	pi.on("session_shutdown", async () => {
		closed = true;
		if (idleTimer) clearTimeout(idleTimer);
		if (pollTimer) clearTimeout(pollTimer);
		if (watchTimer) clearTimeout(watchTimer);
		if (widgetTimer) clearTimeout(widgetTimer);
		// Close-to-park: the session runner parks the run and a running host takes it over.
		// Should Pi die without this, the runner sees its stdin close and parks all the same.
		activation?.kill("SIGTERM");
		conversation.close();
	});
}
