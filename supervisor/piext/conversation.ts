/**
 * The extension's end of the conversation protocol: in-session agent steps.
 *
 * A Pi session that runs its own run (the session runner it spawned holds the
 * claim) has that run's agent steps in its own conversation. This file owns
 * the private UNIX socket the runner's worker connects to (a fresh 0700
 * directory under the temp dir, or /tmp when that path would be too long for
 * a socket address, named to the runner in
 * PI_WORKFLOWS_CONVERSATION) and the wire format, which must match
 * protocol/conversation.py exactly: JSON objects, one per line, each with
 * `v` (VERSION) and `type`. The worker decides everything (which step, which
 * attempt, whether a submission passes, when to remind); this end puts its
 * messages into the conversation, forwards the `workflow` tool's `submit` and
 * `update` calls, and says when a turn settled with the step pending (or was
 * aborted: Escape holds the step). It imports nothing of the extension.
 */

import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

export const VERSION = 1;
export const CONVERSATION_ENV = "PI_WORKFLOWS_CONVERSATION";
const MAX_LINE = 8 << 20;
const CALL_WAIT_MS = 30_000;
const DIR_PREFIX = "pwc-";
const OWNER = "owner.pid";

export interface Delivery {
	kind: "step" | "remind";
	runId: string;
	step: string;
	attempt: string;
	message: string;
}

export interface Verdict {
	ok: boolean;
	message: string;
}

export interface ConversationHooks {
	/** This Pi's session id now (a hello for another session is refused). */
	sessionId(): string;
	/** Put a step message (or a reminder) into the conversation and start a turn. */
	deliver(delivery: Delivery): void;
	/** The step in progress changed (started, held, done): footers may redraw. */
	changed(): void;
}

interface Current {
	runId: string;
	step: string;
	attempt: string;
	held: boolean;
}

type Message = Record<string, unknown> & { v: number; type: string };

/** One line as a message of this version, or the reason it is not one. */
export function decode(line: string): Message | string {
	let value: unknown;
	try {
		value = JSON.parse(line);
	} catch {
		return "a line that is not JSON (torn or garbled)";
	}
	if (!value || typeof value !== "object" || Array.isArray(value)) return "a line that is not a JSON object";
	const message = value as Message;
	if (message.v !== VERSION) return `protocol version ${JSON.stringify(message.v)}, this end speaks ${VERSION}`;
	if (typeof message.type !== "string") return "a message without a type";
	return message;
}

export function encode(type: string, fields: Record<string, unknown> = {}): string {
	return `${JSON.stringify({ v: VERSION, type, ...fields })}\n`;
}

const MAX_SOCKET_PATH = 100; // sun_path is 108 bytes on Linux, 104 on macOS

/** Where the socket's directory goes: the temp dir, or /tmp when its path is too long for a socket. */
function socketBase(): string {
	const base = os.tmpdir();
	return Buffer.byteLength(path.join(base, `${DIR_PREFIX}XXXXXX`, "c.sock")) <= MAX_SOCKET_PATH ? base : "/tmp";
}

/** Remove the socket directories of Pis that are gone (a kill -9 leaves one behind). */
function sweep(): void {
	const base = socketBase();
	let names: string[] = [];
	try {
		names = fs.readdirSync(base).filter((n) => n.startsWith(DIR_PREFIX));
	} catch {
		return;
	}
	for (const name of names) {
		const dir = path.join(base, name);
		try {
			const pid = Number(fs.readFileSync(path.join(dir, OWNER), "utf8"));
			if (!Number.isInteger(pid) || pid <= 0) continue;
			try {
				process.kill(pid, 0);
				continue; // alive (or not ours to judge)
			} catch (err) {
				if ((err as { code?: string }).code !== "ESRCH") continue;
			}
			fs.rmSync(dir, { recursive: true, force: true });
		} catch {
			// no owner file, another user's: kept
		}
	}
}

export class ConversationServer {
	address = "";
	current: Current | undefined;
	private dir = "";
	private server: net.Server | undefined;
	private conn: net.Socket | undefined;
	private calls = new Map<string, (v: Verdict) => void>();
	private seq = 0;

	constructor(private hooks: ConversationHooks) {}

	/** Listen; resolves with the address (empty if the socket cannot be made). */
	start(): Promise<string> {
		if (this.server) return Promise.resolve(this.address);
		sweep();
		try {
			this.dir = fs.mkdtempSync(path.join(socketBase(), DIR_PREFIX));
			fs.chmodSync(this.dir, 0o700);
			fs.writeFileSync(path.join(this.dir, OWNER), String(process.pid), { mode: 0o600 });
		} catch {
			return Promise.resolve("");
		}
		const address = path.join(this.dir, "c.sock");
		const server = net.createServer((sock) => this.accept(sock));
		this.server = server;
		return new Promise((resolve) => {
			server.once("error", () => resolve(""));
			server.listen(address, () => {
				this.address = address;
				resolve(address);
			});
		});
	}

	close(): void {
		this.conn?.destroy();
		this.server?.close();
		this.server = undefined;
		if (this.dir) fs.rmSync(this.dir, { recursive: true, force: true });
		this.dir = "";
		this.address = "";
	}

	/** Whether a runner of this session is connected. */
	get connected(): boolean {
		return !!this.conn && !this.conn.destroyed;
	}

	private accept(sock: net.Socket): void {
		let buffer = "";
		let greeted = false;
		sock.setEncoding("utf8");
		sock.on("error", () => undefined);
		sock.on("data", (chunk: string) => {
			buffer += chunk;
			if (buffer.length > MAX_LINE) {
				sock.destroy();
				return;
			}
			let end: number;
			while ((end = buffer.indexOf("\n")) >= 0) {
				const line = buffer.slice(0, end);
				buffer = buffer.slice(end + 1);
				if (!line.trim()) continue;
				const message = decode(line);
				if (typeof message === "string") {
					if (!greeted) {
						sock.end(encode("refused", { reason: message }));
						return;
					}
					continue; // never acted on: half a message is no message
				}
				if (!greeted) {
					if (message.type !== "hello") {
						sock.end(encode("refused", { reason: "the first message must be hello" }));
						return;
					}
					const session = this.hooks.sessionId();
					if (message.session && message.session !== session) {
						sock.end(encode("refused", { reason: `this Pi runs session ${session}, not ${String(message.session)}` }));
						return;
					}
					greeted = true;
					if (this.conn && this.conn !== sock) this.conn.destroy(); // a newer runner replaces a dead one
					this.conn = sock;
					sock.write(encode("welcome", { session }));
					continue;
				}
				this.received(message);
			}
		});
		sock.on("close", () => {
			if (this.conn !== sock) return;
			this.conn = undefined;
			this.current = undefined;
			for (const [, resolve] of this.calls)
				resolve({ ok: false, message: "the workflow run stopped running in this session (it is parked for a host or the next session)" });
			this.calls.clear();
			this.hooks.changed();
		});
	}

	private received(message: Message): void {
		const str = (k: string) => String(message[k] ?? "");
		switch (message.type) {
			case "step":
			case "remind": {
				this.current = { runId: str("runId"), step: str("step"), attempt: str("attempt"), held: false };
				this.hooks.deliver({ kind: message.type, runId: str("runId"), step: str("step"), attempt: str("attempt"), message: str("message") });
				this.hooks.changed();
				return;
			}
			case "verdict": {
				const resolve = this.calls.get(str("callId"));
				this.calls.delete(str("callId"));
				resolve?.({ ok: message.ok === true, message: str("message") });
				return;
			}
			case "step_done": {
				if (this.current?.attempt === str("attempt")) this.current = undefined;
				this.hooks.changed();
				return;
			}
		}
	}

	private send(type: string, fields: Record<string, unknown>): boolean {
		if (!this.conn || this.conn.destroyed) return false;
		this.conn.write(encode(type, fields));
		return true;
	}

	/** The `workflow` tool's submit or update, judged by the worker. */
	call(fields: { action: string; step?: string; attempt?: string; output?: unknown; update?: string }): Promise<Verdict> {
		const callId = `c${++this.seq}`;
		return new Promise((resolve) => {
			if (!this.send("call", { callId, ...fields })) {
				resolve({ ok: false, message: "no workflow step of this session is in progress" });
				return;
			}
			const timer = setTimeout(() => {
				this.calls.delete(callId);
				resolve({ ok: false, message: "the workflow run did not answer in time; call the tool again" });
			}, CALL_WAIT_MS);
			this.calls.set(callId, (v) => {
				clearTimeout(timer);
				resolve(v);
			});
		});
	}

	/** An agent turn ended with the step still pending; `aborted`: the user pressed Escape. */
	settled(aborted: boolean): void {
		const c = this.current;
		if (!c) return;
		if (aborted) c.held = true;
		this.send("settled", { step: c.step, attempt: c.attempt, aborted });
		this.hooks.changed();
	}

	/** Deliver a held step again; false if no step is held. */
	redeliver(): boolean {
		if (!this.current?.held) return false;
		this.current.held = false;
		return this.send("redeliver", {});
	}
}
