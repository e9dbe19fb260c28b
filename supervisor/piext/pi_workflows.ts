/**
 * The pi-workflows Pi extension: a live Pi session as a client of the runner.
 *
 * Load it with `pi -e "$(pi-workflows pi-extension)"`. It adds the `workflow`
 * tool (the model starts, inspects, cancels and answers runs), the
 * `/workflow` command (the same for the person), activation of the session's
 * queued run at safe idle boundaries, exactly-once delivery of launch-failure
 * follow-ups, a catch-up message when the session opens, and a footer status
 * and widget while a run is active. It talks to the runner only through the
 * `pi-workflows` CLI with `--json` (PI_WORKFLOWS_BIN, else `pi-workflows` on
 * PATH), never through a shell, with Pi's session id as `--session` and the
 * session's working directory as `--project`. The Python side owns every
 * durable decision; this file keeps no state that matters after a crash.
 * docs/pi-extension.md describes the behaviour.
 */

import { StringEnum } from "@mariozechner/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Type } from "typebox";

const CUSTOM_TYPE = "pi-workflows";
const UI_KEY = "pi-workflows";
const POLL_MS = 1500; // progress poll, only while the session has an active run
const IDLE_RETRY_MS = 25; // agent_end fires before the loop is idle: look again shortly
const IDLE_RETRIES = 200; // about 5 s; after that the next agent_end tries again
const SEEN_WAIT_MS = 5000; // how long a sent follow-up may take to reach the session branch
const MAX_ARG_BYTES = 100_000; // larger inputs go through a private file
const ACTIVE = new Set(["queued", "starting", "running"]);
const REPORTED = new Set(["completed", "waiting", "failed", "timed_out", "cancelled", "parked"]);

interface CliResult {
	code: number;
	stdout: string;
	stderr: string;
}

interface RunInfo {
	runId: string;
	workflow: string;
	queueState: string;
	runStatus?: string | null;
	currentNode?: string | null;
	waitingOn?: string | null;
	summary?: string | null;
	error?: string | null;
	errorCode?: string | null;
	createdAt?: number | null;
	startedAt?: number | null;
	finishedAt?: number | null;
	finalOutput?: unknown;
	change?: string;
	mine?: boolean;
	hostRunning?: boolean;
}

interface FollowUp {
	intentId: string;
	runId: string;
	message: string;
	token?: string;
	workflow?: string;
}

interface Snapshot {
	firstSync: boolean;
	runs: RunInfo[];
	notifications: { id: number; runId: string; kind: string; message?: string; workflow?: string }[];
	followUps: FollowUp[];
}

function binary(): string {
	return process.env.PI_WORKFLOWS_BIN || "pi-workflows";
}

/** One `pi-workflows` call (no shell); never rejects. */
function cli(args: string[], cwd: string, timeoutMs = 60_000): Promise<CliResult> {
	return new Promise((resolve) => {
		const child = execFile(
			binary(),
			args,
			{ cwd, timeout: timeoutMs, maxBuffer: 16 << 20, encoding: "utf8" },
			(err, stdout, stderr) => {
				let code = 0;
				if (err) {
					const raw = (err as { code?: unknown }).code;
					code = typeof raw === "number" ? raw : 127;
					if (code === 127 && !stderr) {
					stderr = (err as { killed?: boolean }).killed
						? `pi-workflows: error: ${args[0]} did not answer within ${timeoutMs / 1000} s`
						: `pi-workflows: error: cannot run ${binary()} (${String(raw)}); set PI_WORKFLOWS_BIN`;
				}
				}
				resolve({ code, stdout: String(stdout), stderr: String(stderr) });
			},
		);
		child.stdin?.end();
	});
}

/** The runner's one-line error, without its prefix. */
function reason(result: CliResult): string {
	const line = result.stderr.split("\n").find((l) => l.trim()) ?? `pi-workflows exited ${result.code}`;
	return line.replace(/^pi-workflows: error: /, "");
}

function parse<T>(result: CliResult): T | undefined {
	if (result.code !== 0) return undefined;
	try {
		return JSON.parse(result.stdout) as T;
	} catch {
		return undefined;
	}
}

function elapsed(run: RunInfo): string {
	const from = run.startedAt ?? run.createdAt;
	if (!from) return "";
	const secs = Math.max(0, Math.round(((run.finishedAt ?? Date.now()) - from) / 1000));
	return secs < 60 ? `${secs}s` : `${Math.floor(secs / 60)}m${String(secs % 60).padStart(2, "0")}s`;
}

function shownState(run: RunInfo): string {
	if (run.queueState === "done") return run.runStatus === "waiting" ? "waiting" : "completed";
	return run.queueState;
}

function output(value: unknown): string {
	if (value === undefined || value === null) return "";
	if (typeof value === "string") return value;
	return JSON.stringify(value);
}

/** One line of a report about a run that changed. */
function runLine(run: RunInfo): string {
	const head = `run ${run.runId} (${run.workflow})`;
	switch (run.change) {
		case "completed":
			return `${head} completed: ${output(run.finalOutput)}`;
		case "waiting":
			return `${head} is waiting at checkpoint ${run.waitingOn}: ${(run.summary ?? "").replace(/\s+/g, " ").trim()} Answer it with \`/workflow answer ${run.runId} TEXT\` (or the workflow tool, action answer).`;
		case "failed":
		case "timed_out":
			return `${head} ${run.change === "failed" ? "failed" : "timed out"} [${run.errorCode ?? "?"}]: ${run.error ?? ""}`;
		case "cancelled":
			return `${head} was cancelled.`;
		case "parked":
			return `${head} is parked at ${run.currentNode ?? "?"}; ${run.hostRunning ? "a running host resumes it" : "no host is running: `pi-workflows host --background` resumes it"}.`;
		default:
			return `${head} is ${run.change ?? run.queueState}${run.currentNode ? ` at ${run.currentNode}` : ""}.`;
	}
}

export default function (pi: ExtensionAPI) {
	let ctxRef: ExtensionContext | undefined;
	let sessionId = "";
	let cwd = "";
	let activation: ChildProcess | undefined;
	let settling = false;
	let again = false;
	let closed = false;
	let pollTimer: ReturnType<typeof setTimeout> | undefined;
	let idleTimer: ReturnType<typeof setTimeout> | undefined;
	let nothingFor = ""; // a run `activate` had nothing to do for: not asked again
	let following = ""; // the run the footer follows while it is active
	let catchUpDue = false; // session_start: the next delivery is the catch-up

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
				const status = await cli(session(["status"]), cwd);
				if (status.code !== 0) return; // no store yet: this project never had a run
				const run = (parse<{ run: RunInfo | null }>(status) ?? { run: null }).run;
				const snapshot = parse<Snapshot>(await cli(session(["sync", "--hold-follow-ups"]), cwd));
				const catchUp = catchUpDue;
				if (snapshot) catchUpDue = false;
				if (snapshot && (await deliver(ctx, snapshot, catchUp))) return; // a model turn runs now
				if (closed || !idle(ctx)) return;
				activate(ctx, run);
			} while (again);
		} finally {
			settling = false;
			// A boundary that came while this settle ran (the end of the turn a follow-up
			// started, say) is looked at again rather than lost.
			if (again) atIdle();
			if (activation || following) void poll();
		}
	}

	/** Show a snapshot: one quiet report, then each follow-up exactly once. True if a turn started. */
	async function deliver(ctx: ExtensionContext, snap: Snapshot, catchUp: boolean): Promise<boolean> {
		const followed = new Set(snap.followUps.map((f) => f.runId));
		const runs = snap.runs.filter(
			(r) => !followed.has(r.runId) && REPORTED.has(r.change ?? "") && (catchUp || r.mine),
		);
		const notes = snap.notifications.map((n) => `[${n.kind}] ${n.workflow ?? "?"} (${n.runId}): ${n.message ?? ""}`);
		if (runs.length || notes.length) {
			const title = catchUp ? "pi-workflows: while this session was away" : "pi-workflows:";
			pi.sendMessage({
				customType: CUSTOM_TYPE,
				content: [title, ...runs.map((r) => `- ${runLine(r)}`), ...notes.map((n) => `- ${n}`)].join("\n"),
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
				pi.sendMessage(
					{ customType: CUSTOM_TYPE, content: f.message, display: true, details: { intentId: f.intentId, runId: f.runId } },
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
		const child = spawn(binary(), ["activate", "--session", sessionId, "--park-on-eof", "--project", cwd], {
			cwd,
			detached: true, // its own group: only our SIGTERM or the closed pipe parks it
			stdio: ["pipe", "ignore", "ignore"],
		});
		activation = child;
		child.on("error", () => undefined); // exit follows
		child.on("exit", (code) => {
			if (activation === child) activation = undefined;
			if (code === 0) nothingFor = run.runId; // done, or nothing to do: no second try for it
			atIdle();
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
		if (pollTimer) return;
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
		const run = (parse<{ run: RunInfo | null }>(await cli(session(["status"]), cwd)) ?? { run: null }).run;
		if (closed || asked !== epoch) return; // read before an answer or a resume: poll again
		show(ctx, run);
		if (activation || (run && ACTIVE.has(run.queueState))) {
			if (run) following = run.runId;
			pollTimer = setTimeout(() => {
				pollTimer = undefined;
				void poll();
			}, POLL_MS);
		} else if (following) {
			following = "";
			atIdle(); // it just ended: its result goes into the conversation
		}
	}

	function show(ctx: ExtensionContext, run: RunInfo | null): void {
		if (!run) {
			ctx.ui.setStatus(UI_KEY, undefined);
			ctx.ui.setWidget(UI_KEY, undefined);
			return;
		}
		const state = shownState(run);
		const node = run.currentNode ?? run.waitingOn;
		const time = elapsed(run);
		ctx.ui.setStatus(UI_KEY, `workflow ${run.workflow}: ${state}${node ? ` at ${node}` : ""}${time ? ` (${time})` : ""}`);
		if (ACTIVE.has(run.queueState)) {
			ctx.ui.setWidget(UI_KEY, [
				`pi-workflows  run ${run.runId}`,
				`  ${run.workflow}  ${state}  node ${node ?? "-"}  ${time || "-"}`,
			]);
		} else {
			ctx.ui.setWidget(UI_KEY, undefined);
		}
	}

	// ---- actions shared by the tool and the command ------------------------------

	function inputArgs(input: string): { args: string[]; cleanup: () => void } {
		if (Buffer.byteLength(input) <= MAX_ARG_BYTES) return { args: ["--input-json", input], cleanup: () => undefined };
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pi-workflows-"));
		const file = path.join(dir, "input.json");
		fs.writeFileSync(file, input, { mode: 0o600 });
		return { args: ["--input-file", file], cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
	}

	async function start(workflow: string, input: string): Promise<{ runId: string; workflow: string }> {
		const { args, cleanup } = inputArgs(input);
		try {
			const result = await cli(session(["start", workflow, ...args]), cwd);
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
		const detail = run.error ? ` [${run.errorCode}] ${run.error}` : run.summary ? `: ${run.summary}` : "";
		const node = run.currentNode ?? run.waitingOn;
		return { text: `Run ${run.runId} (${run.workflow}): ${shownState(run)}${node ? ` at ${node}` : ""}${detail}`, run };
	}

	async function cancel(runId: string): Promise<string> {
		const result = await cli(["cancel", runId, "--project", cwd, "--json"], cwd);
		const out = parse<{ runId: string; state: string; stopped: boolean }>(result);
		if (!out) throw new Error(reason(result));
		void poll();
		return out.stopped ? `Run ${out.runId} is ${out.state}.` : `Run ${out.runId}: cancel requested.`;
	}

	async function answer(runId: string, text: string): Promise<string> {
		const result = await cli(session(["answer", runId, "--input-json", JSON.stringify(text)]), cwd);
		const out = parse<{ runId: string; workflow: string }>(result);
		if (!out) throw new Error(reason(result));
		following = out.runId; // its end is reported, however fast the host is
		epoch++;
		void poll();
		const host = /no host is running/.test(result.stderr) ? " No host is running: start one with `pi-workflows host --background`." : "";
		return `Answered ${runId}; continuation ${out.runId} (${out.workflow}) is queued for the host.${host}`;
	}

	// ---- the tool -------------------------------------------------------------------

	pi.registerTool({
		name: "workflow",
		label: "Workflow",
		description:
			"Run durable pi-workflows workflows for this session. action `start` queues a run of `workflow` (with `task` words or `inputJson`) and returns its run id; it starts after your turn ends and its result or failure comes back to you. action `status` shows a run (`runId`, or this session's run), `cancel` cancels `runId`, `answer` answers the checkpoint of waiting run `runId` with `answer`.",
		promptSnippet: "Start, inspect, cancel or answer durable pi-workflows runs",
		promptGuidelines: [
			"Use the workflow tool with action start to launch a workflow; it runs after your turn, so do not claim it has finished. If it fails to start you get one follow-up message: correct the cause, then call workflow start again.",
		],
		parameters: Type.Object({
			action: StringEnum(["start", "status", "cancel", "answer"] as const),
			workflow: Type.Optional(Type.String({ description: "start: the workflow name" })),
			task: Type.Optional(Type.String({ description: "start: the task; becomes the input {\"task\": ...}" })),
			inputJson: Type.Optional(Type.String({ description: "start: the input as JSON text, instead of task" })),
			runId: Type.Optional(Type.String({ description: "status, cancel, answer: the run id" })),
			answer: Type.Optional(Type.String({ description: "answer: the answer text" })),
		}),
		async execute(_toolCallId, params, _signal, _onUpdate, ctx) {
			bind(ctx);
			const text = (t: string, details: Record<string, unknown>) => ({ content: [{ type: "text" as const, text: t }], details });
			switch (params.action) {
				case "start": {
					if (!params.workflow) throw new Error("action start needs `workflow`");
					const input = params.inputJson ?? JSON.stringify(params.task ? { task: params.task } : {});
					const out = await start(params.workflow, input);
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
				case "cancel": {
					if (!params.runId) throw new Error("action cancel needs `runId`");
					return text(await cancel(params.runId), { action: "cancel", runId: params.runId });
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
		"/workflow [NAME TASK... | status [RUN] | cancel RUN | answer RUN TEXT... | resume RUN | watch RUN | chat RUN]";

	pi.registerCommand("workflow", {
		description: "List, start, follow and answer pi-workflows runs of this session",
		handler: async (args, ctx) => {
			bind(ctx);
			const words = args.trim().split(/\s+/).filter(Boolean);
			const [verb, ...rest] = words;
			const say = (t: string, level: "info" | "warning" | "error" = "info") => ctx.ui.notify(t, level);
			try {
				if (!verb) {
					const out = parse<{ workflows: { name: string; description?: string }[] }>(
						await cli(["workflows", "--project", cwd, "--json"], cwd),
					);
					const names = (out?.workflows ?? []).map((w) => `${w.name}${w.description ? ` - ${w.description}` : ""}`);
					say(names.length ? `Workflows:\n${names.join("\n")}` : `No workflows in ${cwd}. ${USAGE}`);
				} else if (verb === "status" || verb === "watch") {
					say((await status(rest[0])).text);
					void poll();
				} else if (verb === "cancel" && rest[0]) {
					say(await cancel(rest[0]));
				} else if (verb === "answer" && rest[0] && rest.length > 1) {
					say(await answer(rest[0], rest.slice(1).join(" ")));
				} else if (verb === "resume" && rest[0]) {
					const result = await cli(["resume", rest[0], "--project", cwd, "--json"], cwd);
					if (result.code !== 0) throw new Error(reason(result));
					say(`Run ${rest[0]} will be resumed by the host.`);
					following = rest[0];
					epoch++;
					void poll();
				} else if (verb === "chat" && rest[0]) {
					say(`Continue that run's agent conversation in a terminal: pi-workflows chat ${rest[0]} --project ${cwd}`);
				} else if (["status", "cancel", "answer", "resume", "watch", "chat"].includes(verb)) {
					say(USAGE, "warning");
				} else {
					const out = await start(verb, JSON.stringify(rest.length ? { task: rest.join(" ") } : {}));
					say(`Workflow ${out.workflow} queued (run ${out.runId}).`);
					atIdle();
				}
			} catch (err) {
				say(err instanceof Error ? err.message : String(err), "error");
			}
		},
	});

	// ---- lifecycle ------------------------------------------------------------------

	pi.on("session_start", async (_event, ctx) => {
		bind(ctx);
		catchUpDue = true;
		atIdle(); // the catch-up, then activation, once no turn is active
	});

	pi.on("agent_end", async (_event, ctx) => {
		bind(ctx);
		atIdle();
	});

	pi.on("session_shutdown", async () => {
		closed = true;
		if (idleTimer) clearTimeout(idleTimer);
		if (pollTimer) clearTimeout(pollTimer);
		// Close-to-park: the session runner parks the run and a running host takes it over.
		// Should Pi die without this, the runner sees its stdin close and parks all the same.
		activation?.kill("SIGTERM");
	});
}
