/**
 * The pi-workflows bridge: the `workflow` tool an agent step submits through.
 *
 * Loaded into a headless `pi --mode rpc` child by the worker with `-e`. Each
 * call is forwarded, as one JSON line, to the worker over the local socket
 * named by PI_WORKFLOWS_BRIDGE, and the worker's verdict is the tool's
 * result: an accepted `submit` ends the agent turn (`terminate`), a rejected
 * one is thrown, so the model sees the reason as the tool's error and can fix
 * the result and submit again. The worker owns every decision; this file
 * only carries the call and the answer.
 */

import { StringEnum } from "@mariozechner/pi-ai";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import * as net from "node:net";
import { Type } from "typebox";

interface Verdict {
	ok: boolean;
	message: string;
}

function ask(request: Record<string, unknown>, signal?: AbortSignal): Promise<Verdict> {
	const address = process.env.PI_WORKFLOWS_BRIDGE;
	return new Promise((resolve, reject) => {
		if (!address) {
			reject(new Error("the workflow tool is not connected to a pi-workflows run"));
			return;
		}
		const socket = net.createConnection({ path: address });
		let buffer = "";
		const fail = (why: string) => {
			socket.destroy();
			reject(new Error(why));
		};
		signal?.addEventListener("abort", () => fail("the step was stopped"), { once: true });
		socket.setEncoding("utf8");
		socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
		socket.on("data", (chunk: string) => {
			buffer += chunk;
			const end = buffer.indexOf("\n");
			if (end < 0) return;
			socket.end();
			try {
				resolve(JSON.parse(buffer.slice(0, end)) as Verdict);
			} catch {
				reject(new Error("the pi-workflows run sent an unreadable answer"));
			}
		});
		socket.on("error", (err: Error) => fail(`the pi-workflows run did not answer (${err.message})`));
	});
}

export default function (pi: ExtensionAPI) {
	pi.registerTool({
		name: "workflow",
		label: "Workflow",
		description:
			"Report to the pi-workflows run that gave you this step. action `submit` hands in the step's result as `output` (ends the step when accepted); action `update` reports progress as a short `update` text, or as `{\"progress\": {\"done\": 3, \"total\": 10}, \"message\": \"...\"}`. Always pass the `step` and `attempt` given in the step contract.",
		promptSnippet: "Submit a workflow step's result or report its progress",
		promptGuidelines: [
			"Use the workflow tool with action submit when the workflow step is done; if the submission is rejected, read the reason, fix the result and submit again.",
		],
		parameters: Type.Object({
			action: StringEnum(["submit", "update"] as const),
			step: Type.String({ description: "The step id from the step contract" }),
			attempt: Type.String({ description: "The attempt id from the step contract" }),
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
		async execute(toolCallId, params, signal) {
			const verdict = await ask({ toolCallId, ...params }, signal);
			if (!verdict.ok) {
				throw new Error(verdict.message);
			}
			return {
				content: [{ type: "text", text: verdict.message }],
				details: { workflow: { action: params.action, step: params.step, attempt: params.attempt } },
				terminate: params.action === "submit",
			};
		},
	});
}
