// What every view gets: the API client, the session, navigation, and a way
// to poll that stops when the view goes away.

import { Api, ApiError } from './api';

const kTokenKey = 'edt.token';

export interface Context {
  api: Api;
  navigate(hash: string): void;
  signOut(): void;
  signedIn(): boolean;
  setToken(token: string): void;
  // Runs fn now and every periodMs until the view is left (a function is
  // asked again after each run, so a view may poll faster while something
  // changes); errors are shown in the view's status line instead of stopping
  // the loop.
  poll(fn: () => Promise<void>, periodMs: number | (() => number)): void;
  // Registers cleanup to run when the view is left.
  onLeave(fn: () => void): void;
  // Shows a message in the page's status line (role=status/alert).
  notify(message: string, kind?: 'info' | 'error'): void;
}

export type View = (ctx: Context, root: HTMLElement, params: Record<string, string>) => void | Promise<void>;

export function storedToken(): string | null {
  return localStorage.getItem(kTokenKey);
}

export function storeToken(token: string | null): void {
  if (token) localStorage.setItem(kTokenKey, token);
  else localStorage.removeItem(kTokenKey);
}

export function describe(e: unknown): string {
  if (e instanceof ApiError) return e.field ? `${e.message} (field ${e.field})` : e.message;
  return e instanceof Error ? e.message : String(e);
}
