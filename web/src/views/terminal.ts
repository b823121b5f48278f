// A shell in one container, in the browser: xterm.js over a WebSocket to a
// pty that edtd opens in the container. Frames: binary ones carry bytes
// (keystrokes up, output down); a text frame from the page is a control
// message, {"type":"resize","cols":C,"rows":R}.

import '@xterm/xterm/css/xterm.css';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import type { Context } from '../app';
import { h } from '../dom';
import { describe } from '../app';

function themeColors(): { background: string; foreground: string; cursor: string } {
  const css = getComputedStyle(document.documentElement);
  return {
    background: css.getPropertyValue('--term-bg').trim() || '#111',
    foreground: css.getPropertyValue('--term-fg').trim() || '#eee',
    cursor: css.getPropertyValue('--accent').trim() || '#4af',
  };
}

// xterm.js makes a row as tall as the font's ascent plus descent, rounded
// down (16 px for DejaVu Sans Mono at 14 px), and clips each row to it;
// DejaVu draws '_' at the very bottom of its descent, so at a device scale
// of 1 the underscore's pixels fall below the row and are clipped away
// ("train mnist.py"). A line height of 1.2 gives each row 3 px of leading,
// which puts the underscore inside its cell at any scale.
export const kTerminalOptions = {
  cursorBlink: true,
  fontSize: 14,
  lineHeight: 1.2,
  scrollback: 5000,
  fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace',
} as const;

// The text of the terminal's buffer, line by line as the shell wrote it (not
// as drawn): what tests compare with the screen.
export function bufferLines(term: Terminal): string[] {
  const buffer = term.buffer.active;
  return Array.from({ length: buffer.length }, (_, i) => buffer.getLine(i)?.translateToString(true) ?? '');
}

// The terminal box as tall as the window leaves below it (main's bottom
// padding kept), so the page does not scroll; never under 280 px.
function fillWindow(box: HTMLElement): void {
  const top = box.getBoundingClientRect().top + window.scrollY;
  const below = parseFloat(getComputedStyle(box.closest('main') ?? document.body).paddingBottom) || 0;
  box.style.height = `${Math.max(280, Math.floor(window.innerHeight - top - below))}px`;
}

export async function terminalView(ctx: Context, root: HTMLElement, params: Record<string, string>): Promise<void> {
  const { name, container } = params;
  const cluster = await ctx.api.getCluster(name);
  const state = h('span', { class: 'muted', id: 'terminal-state', role: 'status' }, 'Connecting…');
  const picker = h(
    'select',
    {
      id: 'terminal-container',
      'aria-label': 'Container',
      onchange: (e: Event) => ctx.navigate(`#/clusters/${encodeURIComponent(name)}/terminal/${encodeURIComponent((e.target as HTMLSelectElement).value)}`),
    },
    cluster.container_status.map((c) => h('option', { value: c.name, selected: c.name === container }, `${c.name} (${c.phase})`)),
  );
  // The box draws the padding and background; xterm.js fits the screen
  // inside it (the fit addon reads its parent's height, padding included).
  const screen = h('div', { class: 'terminal-screen' });
  const box = h('div', { class: 'terminal', id: 'terminal' }, screen);
  root.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/clusters' }, 'Clusters'), ' / ', h('a', { href: `#/clusters/${encodeURIComponent(name)}` }, name), ' / terminal'),
    h('div', { class: 'toolbar' }, h('h1', {}, `Terminal: ${container}`), h('div', { class: 'actions' }, picker, state)),
    h('p', { class: 'help' }, 'Tab and arrow keys go to the shell; press Escape then Tab to move focus out of the terminal.'),
    box,
  );
  root.classList.add('terminal-page');

  const term = new Terminal(kTerminalOptions);
  term.options.theme = themeColors();
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  // For tests and the browser's console: the buffer, apart from its drawing.
  Object.assign(box, { bufferLines: () => bufferLines(term) });
  const resize = () => {
    fillWindow(box);
    fit.fit();
  };
  resize();
  // The terminal keeps Tab for the shell; Escape first lets Tab (or
  // Shift+Tab: the Shift pressed in between does not count) leave it, so
  // keyboard users are never trapped.
  let escaped = false;
  term.attachCustomKeyEventHandler((e) => {
    if (e.type !== 'keydown' || ['Shift', 'Control', 'Alt', 'Meta'].includes(e.key)) return true;
    if (e.key === 'Escape') escaped = true;
    else if (e.key === 'Tab' && escaped) {
      escaped = false;
      return false;
    } else escaped = false;
    return true;
  });

  window.addEventListener('resize', resize);
  let socket: WebSocket | null = null;
  ctx.onLeave(() => {
    window.removeEventListener('resize', resize);
    socket?.close(1000);
    term.dispose();
  });

  let url: string;
  try {
    url = await ctx.api.openTerminal(name, container);
  } catch (e) {
    state.textContent = 'Not connected';
    term.write(`\x1b[31m${describe(e)}\x1b[0m\r\n`);
    return;
  }
  const ws = new WebSocket(url);
  socket = ws;
  ws.binaryType = 'arraybuffer';
  const encoder = new TextEncoder();
  const sendSize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
  };
  ws.addEventListener('open', () => {
    state.textContent = 'Connected';
    sendSize();
    term.focus();
  });
  ws.addEventListener('message', (e) => {
    term.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data as ArrayBuffer));
  });
  ws.addEventListener('close', (e) => {
    state.textContent = e.code === 1000 ? 'Session ended' : `Disconnected${e.reason ? `: ${e.reason}` : ` (code ${e.code})`}`;
    term.write('\r\n\x1b[2m[connection closed]\x1b[0m\r\n');
  });
  term.onData((data) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(data));
  });
  term.onResize(sendSize);
}
