// What the views' tests share: a fake edtd that answers "METHOD /path" from
// a table and records each request, and a view mounted against it with one
// poll run and no timers. Test code only: no view imports it.

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
  return { root, submit, type, text, sent: edtd.sent };
}

// jsdom has no modal dialogs: every confirm dialog confirms at once.
export function confirmDialogsAtOnce(): void {
  HTMLDialogElement.prototype.showModal = function (this: HTMLDialogElement) {
    this.returnValue = 'confirm';
    queueMicrotask(() => this.dispatchEvent(new Event('close')));
  };
}
