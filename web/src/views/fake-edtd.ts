// What the views' tests share: a fake edtd that answers "METHOD /path" from
// a table and records each request, and a view mounted against it with one
// poll run and no timers (or, timedContext, with polls on timers as the
// shell runs them). Test code only: no view imports it.

import { vi } from 'vitest';
import { Api } from '../api';
import type { Context } from '../app';

export type Answer = { status: number; body: unknown };
export type Routes = Record<string, Answer | ((body: unknown) => Answer)>;

export function fakeEdtd(routes: Routes) {
  const sent: [string, unknown][] = [];
  const fetch = vi.fn(async (url: string, init?: RequestInit) => {
    const key = `${init?.method ?? 'GET'} ${url.replace('/api/v1', '')}`;
    const body = init?.body instanceof Blob ? init.body : init?.body ? JSON.parse(String(init.body)) : undefined;
    sent.push([key, body]);
    const route = routes[key];
    const answer = typeof route === 'function' ? route(body) : (route ?? { status: 404, body: { error: { message: `no route ${key}` } } });
    return new Response(JSON.stringify(answer.body), { status: answer.status });
  });
  return { fetch: fetch as unknown as typeof globalThis.fetch, sent };
}

export const tick = () => new Promise((r) => setTimeout(r, 0));

// A view's context over `fetch`, and an empty page to mount it in.
export function fakeContext(fetch: typeof globalThis.fetch): { ctx: Context; root: HTMLElement } {
  const ctx = {
    api: new Api({ token: () => 't', fetch }),
    navigate: vi.fn(),
    notify: vi.fn(),
    // One run now is enough for these tests; no timers.
    poll: (fn: () => Promise<void>) => void fn(),
    onLeave: vi.fn(),
  } as unknown as Context;
  document.body.replaceChildren();
  const root = document.createElement('main');
  document.body.append(root);
  return { ctx, root };
}

// A context whose polls run on timers as the shell's do (fake ones in a
// test that calls vi.useFakeTimers()), and leave(), which ends them as
// leaving the view does.
export function timedContext(fetch: typeof globalThis.fetch): { ctx: Context; root: HTMLElement; leave(): void } {
  const { ctx, root } = fakeContext(fetch);
  const handlers: (() => void)[] = [];
  ctx.onLeave = (fn) => void handlers.push(fn);
  ctx.poll = (fn, periodMs) => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      await fn().catch(() => undefined);
      if (!stopped) timer = setTimeout(run, typeof periodMs === 'function' ? periodMs() : periodMs);
    };
    handlers.push(() => {
      stopped = true;
      clearTimeout(timer);
    });
    void run();
  };
  return { ctx, root, leave: () => handlers.splice(0).forEach((fn) => fn()) };
}

export async function mount(view: (ctx: Context, root: HTMLElement, params: Record<string, string>) => unknown, routes: Routes, params: Record<string, string> = {}) {
  const edtd = fakeEdtd(routes);
  const { ctx, root } = fakeContext(edtd.fetch);
  await view(ctx, root, params);
  await tick();
  const submit = async (form: string) => {
    root.querySelector(form)!.dispatchEvent(new Event('submit', { cancelable: true }));
    for (let i = 0; i < 5; i++) await tick();
  };
  const type = (selector: string, value: string) => (root.querySelector<HTMLInputElement>(selector)!.value = value);
  const text = (selector: string) => root.querySelector(selector)?.textContent ?? '';
  return { root, ctx, submit, type, text, sent: edtd.sent };
}

// jsdom has no modal dialogs: every confirm dialog confirms at once.
export function confirmDialogsAtOnce(): void {
  HTMLDialogElement.prototype.showModal = function (this: HTMLDialogElement) {
    this.returnValue = 'confirm';
    queueMicrotask(() => this.dispatchEvent(new Event('close')));
  };
}
