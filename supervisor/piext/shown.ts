/**
 * What the extension shows of a run: the shapes of the runner's JSON answers,
 * and the pure functions that turn them into report lines, the footer's
 * state, the per-node widget, an answer's JSON and whether a turn was
 * aborted. Imports nothing of the extension.
 */

export interface RunInfo {
	runId: string;
	workflow: string;
	queueState: string;
	runStatus?: string | null;
	currentNode?: string | null;
	waitingOn?: string | null;
	title?: string | null;
	statusDetail?: string | null;
	summary?: string | null;
	request?: DecisionRequest | null;
	answeredWith?: string | null;
	answeredBy?: string | null;
	error?: string | null;
	errorCode?: string | null;
	createdAt?: number | null;
	startedAt?: number | null;
	finishedAt?: number | null;
	finalOutput?: unknown;
	change?: string;
	mine?: boolean;
	hostRunning?: boolean;
	sessionRole?: "origin" | "notify";
	nodes?: { id: string; state: string; since?: number | null; update?: NodeUpdate }[];
}

/** The latest progress update of the node in progress (`status --nodes`). */
export interface NodeUpdate {
	progress?: { done?: number; total?: number; unit?: string; message?: string };
	message?: string;
}

/** A human decision's request, as the waiting run records it (protocol/definitions/decisions.py). */
export interface DecisionRequest {
	question: string;
	audience?: string | null;
	choices: { label: string; description?: string | null; text?: { prompt: string; minLength: number; maxLength: number } }[];
	onTimeout?: string | null;
	dueAt?: number | null;
}

/** Each valid answer as it is typed after the run id: `approve`, `comment TEXT (1-500 characters)`. */
export function answerForms(request: DecisionRequest): string[] {
	return request.choices.map((c) => (c.text ? `${c.label} TEXT (${c.text.minLength}-${c.text.maxLength} characters)` : c.label));
}

/** A waiting human decision in one line: the question, who answers, the answers, the timeout. */
export function decisionText(request: DecisionRequest | null | undefined): string {
	if (!request) return "";
	const flat = (t: string) => t.replace(/\s+/g, " ").trim();
	const who = request.audience ? ` (for ${flat(request.audience)})` : "";
	const due = request.onTimeout && request.dueAt ? ` Unanswered by ${new Date(request.dueAt).toISOString()}, it is answered ${request.onTimeout}.` : "";
	return `It asks${who}: ${flat(request.question)} Answers: ${answerForms(request).join(" | ")}.${due}`;
}

export interface WorkflowList {
	workflows: { name: string; description?: string; path?: string }[];
	errors?: { name: string; path: string; error: string }[];
}

export interface FollowUp {
	intentId: string;
	runId: string;
	message: string;
	token?: string;
	workflow?: string;
}

export interface Snapshot {
	firstSync: boolean;
	runs: RunInfo[];
	notifications: { id: number; runId: string; kind: string; message?: string; workflow?: string }[];
	followUps: FollowUp[];
}

export function elapsed(run: RunInfo): string {
	const from = run.startedAt ?? run.createdAt;
	if (!from) return "";
	const secs = Math.max(0, Math.round(((run.finishedAt ?? Date.now()) - from) / 1000));
	return secs < 60 ? `${secs}s` : `${Math.floor(secs / 60)}m${String(secs % 60).padStart(2, "0")}s`;
}

export function shownState(run: RunInfo): string {
	if (run.queueState === "done") return run.runStatus === "waiting" ? "waiting" : "completed";
	return run.queueState;
}

export function output(value: unknown): string {
	if (value === undefined || value === null) return "";
	if (typeof value === "string") return value;
	return JSON.stringify(value);
}

/** The footer's status line: the workflow, its run's title, its state and node (with the
 * node's status detail while it runs), the time so far, and a held step's note. */
export function footerText(run: RunInfo, held = ""): string {
	const node = run.currentNode ?? run.waitingOn;
	const detail = node && run.currentNode && run.statusDetail ? `: ${run.statusDetail}` : "";
	const title = run.title ? ` "${run.title}"` : "";
	const time = elapsed(run);
	return `workflow ${run.workflow}${title}: ${shownState(run)}${node ? ` at ${node}${detail}` : ""}${time ? ` (${time})` : ""}${held}`;
}

/** One line of a report about a run that changed. */
export function runLine(run: RunInfo, resumingHere = false): string {
	const head = `run ${run.runId} (${run.workflow})`;
	switch (run.change) {
		case "completed":
			return `${head} completed: ${output(run.finalOutput)}`;
		case "waiting":
			if (run.request) return `${head} is waiting at decision ${run.waitingOn}. ${decisionText(run.request)} Answer it with \`/workflow answer ${run.runId} ANSWER\` (or the workflow tool, action answer).`;
			return `${head} is waiting at checkpoint ${run.waitingOn}: ${(run.summary ?? "").replace(/\s+/g, " ").trim()} Answer it with \`/workflow answer ${run.runId} TEXT\` (or the workflow tool, action answer).`;
		case "failed":
		case "timed_out":
			return `${head} ${run.change === "failed" ? "failed" : "timed out"} [${run.errorCode ?? "?"}]: ${run.error ?? ""}`;
		case "cancelled":
			return `${head} was cancelled.`;
		case "parked":
			if (resumingHere) return `${head} is parked at ${run.currentNode ?? "?"}; no host is running, so this session resumes it now.`;
			return `${head} is parked at ${run.currentNode ?? "?"}; ${run.hostRunning ? "a running host resumes it" : "no host is running: `pi-workflows host --background` resumes it"}.`;
		default:
			return `${head} is ${run.change ?? run.queueState}${run.currentNode ? ` at ${run.currentNode}` : ""}.`;
	}
}

const GLYPH: Record<string, string> = { done: "✓", failed: "✗", running: "▶", waiting: "⏸", pending: "·" };

/** The widget: a head line, then one line per node of the run's workflow. */
export function widgetLines(run: RunInfo): string[] {
	const lines = [`pi-workflows  run ${run.runId}  ${run.workflow}  ${shownState(run)}  ${elapsed(run) || "-"}`];
	for (const node of run.nodes ?? []) {
		let note = "";
		if (node.state === "running" && run.queueState === "parked") note = "  parked";
		else if (node.state === "running" && node.since) note = `  ${Math.max(0, Math.round((Date.now() - node.since) / 1000))}s`;
		if (node.state === "running" && node.update && run.queueState !== "parked") note += updateNote(node.update);
		else if (node.state === "waiting") note = "  waiting for an answer";
		const glyph = node.state === "running" && run.queueState === "parked" ? "⏸" : (GLYPH[node.state] ?? "?");
		lines.push(`  ${glyph} ${node.id}${note}`);
	}
	if (!run.nodes?.length) lines.push(`  node ${run.currentNode ?? run.waitingOn ?? "-"}`);
	return lines;
}

/** A node's latest update after its line: `  [#####-----] 3/10 files (30%) copying`. */
export function updateNote(update: NodeUpdate): string {
	const parts: string[] = [];
	const p = update.progress;
	if (p && typeof p.done === "number") {
		const unit = p.unit ? ` ${p.unit}` : "";
		if (typeof p.total === "number" && p.total > 0) {
			const share = Math.max(0, Math.min(1, p.done / p.total));
			const filled = Math.round(share * 10);
			parts.push(`[${"#".repeat(filled)}${"-".repeat(10 - filled)}] ${p.done}/${p.total}${unit} (${Math.floor(share * 100)}%)`);
		} else parts.push(`${p.done}${unit}`);
		if (p.message) parts.push(p.message);
	}
	if (update.message) parts.push(update.message);
	const text = parts.join(" ").replace(/\s+/g, " ").trim();
	return text ? `  ${text.length > 120 ? `${text.slice(0, 119)}…` : text}` : "";
}

/** Whether a turn ended because the user stopped it (Escape, or RPC abort). */
export function aborted(messages: unknown[]): boolean {
	for (let i = messages.length - 1; i >= 0; i--) {
		const m = messages[i] as { role?: string; stopReason?: string };
		if (m?.role === "assistant") return m.stopReason === "aborted";
	}
	return false;
}

/** An answer as the runner's JSON: text that parses as an object, array, boolean or number is JSON; anything else is a string. */
export function answerJson(text: string): string {
	const trimmed = text.trim();
	try {
		const value: unknown = JSON.parse(trimmed);
		if (value !== null && ["object", "boolean", "number"].includes(typeof value)) return trimmed;
	} catch {
		// plain words
	}
	return JSON.stringify(text);
}
