/**
 * How the extension runs the `pi-workflows` command line: one call, no shell,
 * never rejecting, JSON handed over as an argument or (when large) a private
 * file, and the reading of its one-line errors and JSON answers.
 * PI_WORKFLOWS_BIN names the binary, else `pi-workflows` on PATH. Imports
 * nothing of the extension.
 */

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const MAX_ARG_BYTES = 100_000; // larger JSON goes through a private file

export interface CliResult {
	code: number;
	stdout: string;
	stderr: string;
}

export function binary(): string {
	return process.env.PI_WORKFLOWS_BIN || "pi-workflows";
}

/** One `pi-workflows` call (no shell); never rejects. */
export function cli(args: string[], cwd: string, timeoutMs = 60_000): Promise<CliResult> {
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
export function reason(result: CliResult): string {
	const line = result.stderr.split("\n").find((l) => l.trim()) ?? `pi-workflows exited ${result.code}`;
	return line.replace(/^pi-workflows: error: /, "");
}

export function parse<T>(result: CliResult): T | undefined {
	if (result.code !== 0) return undefined;
	try {
		return JSON.parse(result.stdout) as T;
	} catch {
		return undefined;
	}
}

/** JSON text for a command: `[inline, text]`, or past 100 KB `[fileFlag, FILE]` with FILE a
 * private 0600 file in a 0700 directory that `cleanup` removes once the call is done. */
export function jsonArgs(text: string, inline: string, fileFlag: string): { args: string[]; cleanup: () => void } {
	if (Buffer.byteLength(text) <= MAX_ARG_BYTES) return { args: [inline, text], cleanup: () => undefined };
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pi-workflows-"));
	const file = path.join(dir, "input.json");
	fs.writeFileSync(file, text, { mode: 0o600 });
	return { args: [fileFlag, file], cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
