// What screen-reader and keyboard users get beyond the markup: one polite live region that
// announces results (a transcript ready, a suggestion, a narration finished, a file saved;
// refusals announce themselves as alerts in their notice), and the focus put somewhere
// sensible when the control that had it goes away.
import { useEffect, useRef, useState } from "preact/hooks";

type Announcement = { n: number; message: string };

let current: Announcement = { n: 0, message: "" };
const listeners = new Set<(a: Announcement) => void>();

/** Says `message` through the window's live region (politely: after what is being read). */
export function announce(message: string): void {
  current = { n: current.n + 1, message };
  listeners.forEach((l) => l(current));
}

/** The window's live region, once, in the layout. Each announcement is a new node, so the
 * same message twice is read twice. */
export function Announcer() {
  const [said, setSaid] = useState(current);
  useEffect(() => {
    listeners.add(setSaid);
    return () => {
      listeners.delete(setSaid);
    };
  }, []);
  return (
    <div class="sr-only" role="status" aria-live="polite" data-testid="announcer">
      {said.message && <p key={said.n}>{said.message}</p>}
    </div>
  );
}

/** Whether the keyboard focus is lost: on nothing, or on a control that is disabled or gone
 * (WebKit leaves it on a button that becomes disabled). */
export function focusLost(): boolean {
  const e = document.activeElement as HTMLElement | null;
  return (
    e === null ||
    e === document.body ||
    !e.isConnected ||
    (e as HTMLButtonElement).disabled === true
  );
}

/** Whether the last input was the keyboard. After a click on nothing focusable the focus is on
 * the page, not lost, and stays there (WKWebView does not focus a clicked button, so there
 * every click would look like lost focus). */
let keyboardLast = false;
if (typeof document !== "undefined") {
  document.addEventListener("keydown", () => (keyboardLast = true), { capture: true });
  document.addEventListener("pointerdown", () => (keyboardLast = false), { capture: true });
}

/** Moves the focus to the element with `testid` once it is drawn, if the focus is lost (or on
 * `from`, the control whose action this follows): never away from where the user moved it
 * meanwhile. */
export function focusWhenLost(testid: string, from?: string): void {
  requestAnimationFrame(() => {
    const active = document.activeElement as HTMLElement | null;
    if (!keyboardLast && (active === null || active === document.body)) return;
    const onFrom = from !== undefined && active?.dataset.testid === from;
    if (!focusLost() && !onFrom) return;
    document.querySelector<HTMLElement>(`[data-testid='${testid}']`)?.focus();
  });
}

/** Puts the focus on the view's heading when the view changes (its name is read, and Tab goes
 * on into the view), not when the window first opens. */
export function useFocusHeadingOn(view: string): void {
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    requestAnimationFrame(() => document.querySelector<HTMLElement>(".content h1")?.focus());
  }, [view]);
}
