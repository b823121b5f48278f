// A few lines instead of a framework: h() builds elements, and views
// re-render the parts that change.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | null | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'value' && 'value' in el) {
      (el as HTMLInputElement).value = String(value);
    } else if (key === 'checked' && 'checked' in el) {
      (el as HTMLInputElement).checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el: Element, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

export function replace(el: Element, ...children: (Child | Child[])[]): void {
  el.replaceChildren();
  append(el, children);
}

// "3m", "2h", "5d": how long ago an ISO time was.
export function age(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return '—';
  const s = Math.max(0, Math.round((now - then) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function phaseBadge(phase: string): HTMLSpanElement {
  return h('span', { class: `phase phase-${phase.toLowerCase()}`, 'data-phase': phase }, phase);
}

let nextId = 0;
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

// Re-renders inside root without taking the keyboard focus away: the
// focused control is found again by its id, label or link after the render.
export function keepFocus(root: Element, render: () => void): void {
  const active = document.activeElement;
  const key = active && root.contains(active) ? ['id', 'aria-label', 'href'].map((a) => [a, active.getAttribute(a)] as const).find(([, v]) => v) : undefined;
  render();
  if (key) root.querySelector<HTMLElement>(attr(key[0], key[1]!))?.focus();
}

// An attribute selector for an exact value: [name="value"].
export function attr(name: string, value: string): string {
  return `[${name}="${value.replace(/["\\]/g, '\\$&')}"]`;
}
