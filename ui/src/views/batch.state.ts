// The batch form's servers, as the shell takes them.
import type { BatchServers } from "../api.ts";

/** The most pieces one server takes at once: the shell's bound (`MAX_PER_SERVER`). */
export const MAX_PER_SERVER = 64;

/** Pieces per server as typed: `null` when empty (one), else a whole number 1 to
 * [`MAX_PER_SERVER`], or `undefined` when it is not one (the form says so and does not start). */
export function piecesPerServer(text: string): number | null | undefined {
  const typed = text.trim();
  if (typed === "") return null;
  if (!/^[0-9]+$/.test(typed)) return undefined;
  const n = Number(typed);
  return n >= 1 && n <= MAX_PER_SERVER ? n : undefined;
}

/** The servers the form names: one URL a line, blank lines dropped; `null` when none (this
 * machine's engine) or when pieces per server is not a whole number in range. Checked again,
 * with every other entry's bounds, by the shell. */
export function batchServers(urls: string, perServer: string, allowRemote: boolean): BatchServers | null {
  const named = urls
    .split("\n")
    .map((u) => u.trim())
    .filter((u) => u !== "");
  const pieces = piecesPerServer(perServer);
  if (named.length === 0 || pieces === undefined) return null;
  return { urls: named, per_server: pieces, allow_remote: allowRemote };
}
