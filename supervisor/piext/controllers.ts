/**
 * The extension's `/controller` command and the footer's count of resources not
 * ready: `list [CONTROLLER] | get NAME KEY | apply NAME KEY JSON | reconcile NAME
 * KEY | delete NAME KEY`, each one `pi-workflows controller ...` call (no shell)
 * whose own text is what the person reads, so the terminal and Pi word a
 * resource alike. The spec of `apply` is checked to be a JSON object before
 * anything runs. Imports clicall.ts only; the extension hands in its project
 * directory and its poll.
 */

import { type CliResult, cli, jsonArgs, parse, reason } from "./clicall.ts";

export const CONTROLLER_VERBS = ["list", "get", "apply", "reconcile", "delete"];
export const CONTROLLER_USAGE = "/controller [list [CONTROLLER] | get NAME KEY | apply NAME KEY JSON | reconcile NAME KEY | delete NAME KEY]";
export const CONTROLLERS_KEY = "pi-workflows-controllers";
const NAMES_TTL_MS = 30_000;

/** The footer's text for N resources not ready; undefined (cleared) for none. */
export function notReadyText(count: number | undefined): string | undefined {
	if (!count || count < 1) return undefined;
	return `controllers: ${count} not ready (/controller list)`;
}

/** `apply`'s spec as typed after the key: a JSON object, or why not. */
export function parseSpec(text: string): { spec: string } | { error: string } {
	if (!text.trim()) return { error: "apply needs the spec as JSON after the key: /controller apply NAME KEY {...}" };
	let value: unknown;
	try {
		value = JSON.parse(text);
	} catch (err) {
		return { error: `the spec is not valid JSON: ${err instanceof Error ? err.message : String(err)}` };
	}
	if (typeof value !== "object" || value === null || Array.isArray(value)) {
		return { error: `the spec must be a JSON object ({...}), not ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}` };
	}
	return { spec: text.trim() };
}

interface Item {
	value: string;
	label: string;
	description?: string;
}

export interface ControllerDeps {
	cwd: () => string;
	changed: () => void; // something was written: the footer's count may have moved
}

/** The command's handler and completions, over the extension's project directory. */
export function controllerCommand(deps: ControllerDeps) {
	let names: { at: number; list: string[] } | undefined;

	const call = (args: string[]): Promise<CliResult> => cli(["controller", ...args, "--project", deps.cwd()], deps.cwd());
	const text = (result: CliResult): string => {
		if (result.code !== 0) throw new Error(reason(result));
		return result.stdout.trim();
	};

	async function controllerNames(): Promise<string[]> {
		if (names && Date.now() - names.at < NAMES_TTL_MS) return names.list;
		const out = parse<{ controllers: { name: string }[] }>(await cli(["controllers", "--project", deps.cwd(), "--json"], deps.cwd()));
		names = { at: Date.now(), list: (out?.controllers ?? []).map((c) => c.name) };
		return names.list;
	}

	async function keys(controller: string): Promise<string[]> {
		const out = parse<{ resources: { key: string }[] }>(await call(["list", "--controller", controller, "--json"]));
		return (out?.resources ?? []).map((r) => r.key);
	}

	async function apply(name: string, key: string, spec: string): Promise<string> {
		const { args, cleanup } = jsonArgs(spec, "--spec-json", "--spec-file");
		try {
			return text(await call(["apply", name, key, ...args]));
		} finally {
			cleanup();
		}
	}

	/** What `/controller ARGS` answers: the text to show and its level. */
	async function run(args: string): Promise<{ text: string; level: "info" | "warning" | "error" }> {
		const line = args.trim();
		const words = line.split(/\s+/).filter(Boolean);
		const [verb, name, key] = words;
		try {
			if (verb === "list" && words.length <= 2) {
				return { text: text(await call(name ? ["list", "--controller", name] : ["list"])), level: "info" };
			}
			if ((verb === "get" || verb === "reconcile" || verb === "delete") && words.length === 3) {
				const out = text(await call([verb, name, key]));
				if (verb !== "get") deps.changed();
				return { text: out, level: "info" };
			}
			if (verb === "apply" && name && key) {
				// The spec as typed after the key: JSON keeps its spaces.
				const rest = line.slice(verb.length).trimStart().slice(name.length).trimStart().slice(key.length);
				const spec = parseSpec(rest);
				if ("error" in spec) return { text: spec.error, level: "error" };
				const out = await apply(name, key, spec.spec);
				deps.changed();
				return { text: out, level: "info" };
			}
			return { text: CONTROLLER_USAGE, level: "warning" };
		} catch (err) {
			return { text: err instanceof Error ? err.message : String(err), level: "error" };
		}
	}

	/** Verbs, then controller names, then the keys of that controller. */
	async function complete(prefix: string): Promise<Item[] | null> {
		const words = prefix.split(" ");
		const items: Item[] = [];
		if (words.length === 1) {
			for (const v of CONTROLLER_VERBS) if (v.startsWith(prefix) && v !== prefix) items.push({ value: `${v} `, label: v, description: "subcommand" });
		} else if (words.length === 2 && CONTROLLER_VERBS.includes(words[0])) {
			for (const n of await controllerNames().catch(() => [] as string[]))
				if (n.startsWith(words[1]) && n !== words[1]) items.push({ value: `${words[0]} ${n} `, label: n, description: "controller" });
		} else if (words.length === 3 && words[0] !== "list" && CONTROLLER_VERBS.includes(words[0])) {
			for (const k of await keys(words[1]).catch(() => [] as string[]))
				if (k.startsWith(words[2]) && k !== words[2]) items.push({ value: `${words[0]} ${words[1]} ${k} `, label: k, description: "resource" });
		}
		return items.length ? items : null;
	}

	return { run, complete };
}
