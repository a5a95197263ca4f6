// The window's languages: message catalogs (ICU message format, read by FormatJS's
// intl-messageformat), the current locale (the system's, or the one chosen in Settings), and
// numbers, durations and dates through `Intl`. Every string the window shows comes from `t`
// (plain text) or `tr` (text with elements in it); the catalogs' completeness and the absence of
// strings left in code are tested (i18n.test.ts).
import { IntlMessageFormat } from "intl-messageformat";
import type { ComponentChildren } from "preact";
import { de } from "./de";
import { en, type Catalog, type MessageKey } from "./en";
import { es } from "./es";
import { fr } from "./fr";
import { ja } from "./ja";
import { pseudo } from "./pseudo";
import { zhHans } from "./zh-Hans";

export type { Catalog, MessageKey };

/** The languages the window speaks, English first (the fallback). */
export const LOCALES = ["en", "de", "es", "fr", "ja", "zh-Hans"] as const;
/** A language, or the pseudo-locale (longer, accented English, for finding cut-off text). */
export type Locale = (typeof LOCALES)[number] | "pseudo";

export const CATALOGS: Record<Locale, Catalog> = { en, de, es, fr, ja, "zh-Hans": zhHans, pseudo };

/** Each language by its own name (shown as such in every language). */
export const LOCALE_NAMES: Record<Locale, string> = {
  en: "English",
  de: "Deutsch",
  es: "Español",
  fr: "Français",
  ja: "日本語",
  "zh-Hans": "简体中文",
  pseudo: "[Ƥşéûðô]",
};

/** Where the choice made in Settings is kept ("system" or a locale). */
export const STORAGE_KEY = "headroom.language";

/** The supported locale for a BCP 47 tag (`de-AT` → `de`, `zh-CN` → `zh-Hans`), if any. */
export function matchLocale(tag: string): Locale | null {
  const lower = tag.toLowerCase();
  if (lower === "pseudo" || lower === "en-xa") return "pseudo";
  const [primary, ...rest] = lower.split(/[-_]/);
  if (primary === "zh") {
    // Simplified Chinese for the mainland, Singapore and an explicit Hans; Traditional is not
    // a catalog, so Taiwan, Hong Kong and Macao fall through to the next preference.
    if (rest.includes("hant") || rest.some((r) => r === "tw" || r === "hk" || r === "mo")) return null;
    return "zh-Hans";
  }
  return (LOCALES as readonly string[]).find((l) => l === primary) as Locale | undefined ?? null;
}

/** The system's language: the first of the browser's preferences we have, else English. */
export function systemLocale(preferences?: readonly string[]): Locale {
  const prefs =
    preferences ?? (typeof navigator === "undefined" ? [] : navigator.languages?.length ? navigator.languages : [navigator.language]);
  for (const p of prefs) {
    const m = p ? matchLocale(p) : null;
    if (m && m !== "pseudo") return m;
  }
  return "en";
}

function storedChoice(): string {
  try {
    return (typeof localStorage !== "undefined" && localStorage.getItem(STORAGE_KEY)) || "system";
  } catch {
    return "system";
  }
}

/** "system", or the locale chosen in Settings. */
export function languageChoice(): "system" | Locale {
  const chosen = storedChoice();
  return chosen !== "system" && chosen in CATALOGS ? (chosen as Locale) : "system";
}

function resolve(choice: "system" | Locale): Locale {
  return choice === "system" ? systemLocale() : choice;
}

let current: Locale = resolve(languageChoice());
const listeners = new Set<(l: Locale) => void>();

/** The locale the window is in now. */
export function locale(): Locale {
  return current;
}

/** The locale `Intl` formats in (the pseudo-locale formats as English). */
export function intlLocale(l: Locale = current): string {
  return l === "pseudo" ? "en" : l;
}

function applyDocumentLang() {
  if (typeof document !== "undefined") document.documentElement.lang = current === "pseudo" ? "en-XA" : current;
}
applyDocumentLang();

/** Chooses the language ("system": follow the system), keeps the choice and re-renders. */
export function setLanguage(choice: "system" | Locale): void {
  try {
    if (typeof localStorage !== "undefined") {
      if (choice === "system") localStorage.removeItem(STORAGE_KEY);
      else localStorage.setItem(STORAGE_KEY, choice);
    }
  } catch {
    // Not kept (storage refused): still applied for this session.
  }
  setLocale(resolve(choice));
}

/** Switches the window to `l` for this session (see `setLanguage` to keep it). */
export function setLocale(l: Locale): void {
  if (l === current) return;
  current = l;
  applyDocumentLang();
  listeners.forEach((f) => f(l));
}

/** Calls `f` on each change of locale; returns the unsubscribe. */
export function onLocaleChange(f: (l: Locale) => void): () => void {
  listeners.add(f);
  return () => listeners.delete(f);
}

const compiled = new Map<string, IntlMessageFormat>();

function message(l: Locale, key: MessageKey): IntlMessageFormat {
  const id = `${l}\u0000${key}`;
  let m = compiled.get(id);
  if (!m) {
    m = new IntlMessageFormat(CATALOGS[l][key] ?? en[key], intlLocale(l));
    compiled.set(id, m);
  }
  return m;
}

type Values = Record<string, string | number | Date | boolean | null | undefined>;

function formatIn(l: Locale, key: MessageKey, values?: Record<string, unknown>): unknown {
  try {
    return message(l, key).format(values as never);
  } catch (e) {
    if (l !== "en") return formatIn("en", key, values);
    return key;
  }
}

/** The message `key` in the current language, with `values` in its placeholders. */
export function t(key: MessageKey, values?: Values): string {
  const out = formatIn(current, key, values);
  return Array.isArray(out) ? out.join("") : String(out);
}

/** A message with elements among its values (`{url}` as a `<code>`): text and elements. */
export function tr(key: MessageKey, values: Record<string, ComponentChildren | string | number>): ComponentChildren {
  return formatIn(current, key, values) as ComponentChildren;
}

/** Whether the catalog has `key` (for codes that come from the core, e.g. `signal.<code>`). */
export function has(key: string): key is MessageKey {
  return Object.prototype.hasOwnProperty.call(en, key);
}

/** The label of a typed code from the core (`prefix.code`), or the code itself when unknown. */
export function codeLabel(prefix: string, code: string): string {
  const key = `${prefix}.${code.replace(/ /g, "_")}`;
  return has(key) ? t(key) : code;
}

// --- Numbers, durations and dates through Intl (cached per locale and options).

const numberFormats = new Map<string, Intl.NumberFormat>();
function nf(options: Intl.NumberFormatOptions): Intl.NumberFormat {
  const id = `${intlLocale()}|${JSON.stringify(options)}`;
  let f = numberFormats.get(id);
  if (!f) {
    f = new Intl.NumberFormat(intlLocale(), options);
    numberFormats.set(id, f);
  }
  return f;
}

/** A number; with `digits`, exactly that many decimals. */
export function formatNumber(n: number, digits?: number, grouping = true): string {
  return nf(
    digits === undefined
      ? { maximumFractionDigits: 3, useGrouping: grouping }
      : { minimumFractionDigits: digits, maximumFractionDigits: digits, useGrouping: grouping },
  ).format(n);
}

/** A fraction (0..1) as a percentage, with `digits` decimals. */
export function formatPercent(fraction: number, digits = 0): string {
  return nf({ style: "percent", minimumFractionDigits: digits, maximumFractionDigits: digits }).format(fraction);
}

/** Seconds, as "1.5 s" (`digits` decimals). */
export function formatSeconds(secs: number, digits = 1): string {
  return t("unit.seconds", { value: formatNumber(secs, digits) });
}

/** Seconds as a clock shows them: "0:07", "12:05", "1:02:03" (as the CLI's progress line). */
export function formatStopwatch(secs: number): string {
  const total = Number.isFinite(secs) ? Math.round(Math.max(0, secs)) : 0;
  const [hours, minutes, seconds] = [Math.floor(total / 3600), Math.floor(total / 60) % 60, total % 60];
  const two = (n: number) => String(n).padStart(2, "0");
  return hours > 0 ? `${hours}:${two(minutes)}:${two(seconds)}` : `${minutes}:${two(seconds)}`;
}

/** Milliseconds, as "120 ms". */
export function formatMs(ms: number): string {
  return t("unit.ms", { value: formatNumber(ms, 0) });
}

/** Memory in MiB, as "8000 MiB" (figures, not grouped, as the core's messages write them). */
export function formatMib(mib: number): string {
  return t("unit.mib", { value: formatNumber(mib, 0, false) });
}

const dateFormats = new Map<string, Intl.DateTimeFormat>();
function df(options: Intl.DateTimeFormatOptions): Intl.DateTimeFormat {
  const id = `${intlLocale()}|${JSON.stringify(options)}`;
  let f = dateFormats.get(id);
  if (!f) {
    f = new Intl.DateTimeFormat(intlLocale(), options);
    dateFormats.set(id, f);
  }
  return f;
}

/** A moment (ms since the epoch) as date and time. */
export function formatDateTime(ms: number): string {
  return df({ dateStyle: "medium", timeStyle: "short" }).format(new Date(ms));
}

/** A moment (ms since the epoch) as a time of day. */
export function formatClock(ms: number): string {
  return df({ timeStyle: "medium" }).format(new Date(ms));
}

/** A list of things ("a, b and c") in the current language. (Not Intl's "unit" lists: they
 * are for measures, and Chinese writes those with no separator at all.) */
export function formatList(items: string[]): string {
  return new Intl.ListFormat(intlLocale(), { style: "short", type: "conjunction" }).format(items);
}

/** A language's name (ISO 639 code) in the current language, or `fallback`. */
export function languageName(code: string, fallback: string): string {
  try {
    return new Intl.DisplayNames([intlLocale()], { type: "language" }).of(code) ?? fallback;
  } catch {
    return fallback;
  }
}
