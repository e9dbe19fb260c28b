/**
 * How the extension runs the `pi-workflows` command line: one call, no shell,
 * never rejecting, and the reading of its one-line errors and JSON answers.
 * PI_WORKFLOWS_BIN names the binary, else `pi-workflows` on PATH. Imports
 * nothing of the extension.
 */

import { execFile } from "node:child_process";

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
