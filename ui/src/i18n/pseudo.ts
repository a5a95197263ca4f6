// The pseudo-locale: English made longer (about 35%), accented and bracketed, so text that is
// cut off, built by concatenation or left in code stands out. Placeholders, ICU syntax
// (plural and select arguments, `#`) and tags are kept as they are.
import { en, type Catalog, type MessageKey } from "./en";

const ACCENTS: Record<string, string> = {
  a: "á", b: "ƀ", c: "ç", d: "ð", e: "é", f: "ƒ", g: "ĝ", h: "ĥ", i: "î", j: "ĵ", k: "ķ", l: "ļ", m: "ɱ",
  n: "ñ", o: "ö", p: "þ", q: "ǫ", r: "ŕ", s: "š", t: "ţ", u: "û", v: "ṽ", w: "ŵ", x: "ẋ", y: "ý", z: "ž",
  A: "Å", B: "Ɓ", C: "Ç", D: "Ð", E: "É", F: "Ƒ", G: "Ĝ", H: "Ĥ", I: "Î", J: "Ĵ", K: "Ķ", L: "Ļ", M: "Ṁ",
  N: "Ñ", O: "Ö", P: "Ƥ", Q: "Ǫ", R: "Ŕ", S: "Š", T: "Ţ", U: "Û", V: "Ṽ", W: "Ŵ", X: "Ẋ", Y: "Ý", Z: "Ž",
};

/** Accents the letters of plain text and lengthens it by repeating vowels. */
function stretch(text: string): { out: string; letters: number; added: number } {
  let out = "";
  let letters = 0;
  let added = 0;
  let k = 0;
  for (const ch of text) {
    const accented = ACCENTS[ch];
    if (accented === undefined) {
      out += ch;
      continue;
    }
    letters += 1;
    out += accented;
    // Every other vowel doubled: about a third longer, like German or French.
    if ("aeiouAEIOU".includes(ch) && k++ % 2 === 0) {
      out += accented;
      added += 1;
    }
  }
  return { out, letters, added };
}

/** The pseudo-locale's message for an English ICU message: only literal text changes; `{…}`
 * arguments keep their names and keywords, plural and select branches are converted inside. */
export function pseudoMessage(message: string): string {
  let out = "";
  let letters = 0;
  let length = 0;
  let added = 0;
  // Walk the message: text at depth 0 (and inside plural/select branches) is converted;
  // argument heads (`{name, plural, one `) are copied as they are.
  let i = 0;
  const convertText = (text: string) => {
    const s = stretch(text);
    letters += s.letters;
    length += text.length;
    added += s.added;
    out += s.out;
  };
  const parse = (inBranch: boolean) => {
    let text = "";
    while (i < message.length) {
      const ch = message[i];
      if (ch === "{") {
        convertText(text);
        text = "";
        parseArgument();
        continue;
      }
      if (ch === "}" && inBranch) {
        convertText(text);
        return;
      }
      if (ch === "#" && inBranch) {
        convertText(text);
        text = "";
        out += "#";
        i += 1;
        continue;
      }
      text += ch;
      i += 1;
    }
    convertText(text);
  };
  const parseArgument = () => {
    // "{" name ["," type ["," style-or-branches]] "}"
    const start = i;
    let j = i;
    // The head ends at the first "{" inside (branches) or at the matching "}".
    for (; j < message.length; j++) {
      if (message[j] === "{" && j > start) break;
      if (message[j] === "}") break;
    }
    out += message.slice(start, j);
    i = j;
    if (message[i] === "}") {
      out += "}";
      i += 1;
      return;
    }
    // Branches: "{text}" separated by selectors, until the argument's closing "}".
    while (i < message.length) {
      const ch = message[i];
      if (ch === "{") {
        out += "{";
        i += 1;
        parse(true);
        out += "}";
        i += 1;
        continue;
      }
      if (ch === "}") {
        out += "}";
        i += 1;
        return;
      }
      out += ch;
      i += 1;
    }
  };
  parse(false);
  // Padding brings the text to about 40% longer than English (brackets aside); text with no
  // letters (symbols, units) gets one mark, to show it went through the catalog.
  const pad = letters === 0 ? 1 : Math.max(1, Math.ceil(length * 0.4) - added - 1);
  return `[${out} ${"·".repeat(pad)}]`;
}

export const pseudo = Object.fromEntries(
  (Object.keys(en) as MessageKey[]).map((k) => [k, pseudoMessage(en[k])]),
) as Catalog;
