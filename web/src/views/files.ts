// One folder of a volume: its folders and files with their sizes, each
// file downloadable, each entry deletable (a folder with all it holds,
// after a confirmation), and the upload form aimed at this folder. The
// path is in the URL (#/volumes/NAME/files/dir%2Fsub), so a folder can be
// reloaded and linked; the list follows what containers write (polled).

import { ApiError, type VolumeEntry } from '../api';
import type { Context } from '../app';
import { h, keepFocus, replace } from '../dom';
import { unixTime } from '../platform';
import { confirmDialog } from './dialog';
import { plainMessage } from './fields';
import { uploadForm } from './upload';

// 1023 B, 1.5 KiB, 11.1 MiB: a file's size for people.
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function filesHash(volume: string, path: string): string {
  return `#/volumes/${encodeURIComponent(volume)}/files${path ? `/${encodeURIComponent(path)}` : ''}`;
}

// Folders first, then files, each by name.
export function sortEntries(entries: VolumeEntry[]): VolumeEntry[] {
  return [...entries].sort((a, b) => Number(b.type === 'directory') - Number(a.type === 'directory') || a.name.localeCompare(b.name));
}

// Volumes / data / inputs / sub: each folder on the way a link.
function crumbs(volume: string, path: string): HTMLElement {
  const parts = path ? path.split('/') : [];
  const links = parts.flatMap((part, i) => [' / ', i === parts.length - 1 ? part : h('a', { href: filesHash(volume, parts.slice(0, i + 1).join('/')) }, part)]);
  return h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/volumes' }, 'Volumes'), ' / ', parts.length ? h('a', { href: filesHash(volume, '') }, volume) : volume, ...links);
}

function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

export async function filesView(ctx: Context, root: HTMLElement, params: Record<string, string>): Promise<void> {
  const volume = params['name'];
  const folder = params['path'] ?? '';
  const body = h('tbody');
  const note = h('p', { class: 'help', id: 'files-note' });
  const rowError = h('p', { class: 'field-error', id: 'files-error', role: 'alert' });
  const upload = uploadForm(ctx.api, ctx.notify.bind(ctx), () => void load());
  upload.setVolumes([volume]);
  upload.setFolder(folder);
  const inFolder = (name: string) => (folder ? `${folder}/${name}` : name);

  async function download(entry: VolumeEntry): Promise<void> {
    rowError.textContent = '';
    try {
      saveBlob(await ctx.api.downloadFile(volume, inFolder(entry.name)), entry.name);
    } catch (err) {
      rowError.textContent = `${entry.name}: ${plainMessage(err)}`;
    }
  }

  async function remove(entry: VolumeEntry): Promise<void> {
    rowError.textContent = '';
    const folderText = entry.type === 'directory' ? 'The folder and everything in it go' : 'The file goes';
    const ok = await confirmDialog({ title: `Delete ${inFolder(entry.name)} from ${volume}?`, body: `${folderText}, for every cluster that mounts ${volume}.`, confirm: 'Delete', danger: true });
    if (!ok) return;
    try {
      await ctx.api.deleteFile(volume, inFolder(entry.name));
      ctx.notify(`Deleted ${inFolder(entry.name)} from ${volume}.`);
    } catch (err) {
      rowError.textContent = `${entry.name}: ${plainMessage(err)}`;
    }
    await load();
  }

  function row(entry: VolumeEntry): HTMLElement {
    const path = inFolder(entry.name);
    const name = entry.type === 'directory' ? h('a', { href: filesHash(volume, path) }, `${entry.name}/`) : entry.name;
    return h(
      'tr',
      { 'data-entry': entry.name, 'data-type': entry.type },
      h('th', { scope: 'row', class: 'mono' }, name, entry.type === 'link' ? h('span', { class: 'muted' }, ' (link)') : null),
      h('td', { class: 'num', 'data-col': 'size' }, entry.type === 'file' ? formatBytes(entry.bytes) : entry.type === 'directory' ? 'folder' : '—'),
      h('td', { 'data-col': 'modified' }, unixTime(entry.modified, '—')),
      h(
        'td',
        { class: 'row-actions' },
        entry.type === 'file' ? h('button', { type: 'button', class: 'secondary small', 'aria-label': `Download ${entry.name}`, onclick: () => void download(entry) }, 'Download') : null,
        h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete ${entry.name}`, onclick: () => void remove(entry) }, 'Delete'),
      ),
    );
  }

  async function load(): Promise<void> {
    let entries: VolumeEntry[] = [];
    try {
      const listing = await ctx.api.listFiles(volume, folder);
      entries = sortEntries(listing.entries);
      note.textContent = listing.truncated ? `Only the first ${entries.length} entries are listed.` : '';
    } catch (err) {
      if (!(err instanceof ApiError && err.status < 500)) throw err;
      note.textContent = plainMessage(err);
    }
    keepFocus(body, () => replace(body, entries.length ? entries.map(row) : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, 'Nothing here yet.'))));
  }

  root.append(
    crumbs(volume, folder),
    h('div', { class: 'toolbar' }, h('h1', { id: 'files-title' }, `Files in ${volume}${folder ? `/${folder}` : ''}`)),
    h(
      'div',
      { class: 'stack' },
      h(
        'section',
        { class: 'scroll', 'aria-labelledby': 'files-title', tabindex: '0' },
        h('table', { class: 'list', id: 'files-table' }, h('thead', {}, h('tr', {}, ['Name', 'Size', 'Modified', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions'))))), body),
        note,
        rowError,
      ),
      upload.el,
    ),
  );
  ctx.poll(load, 3000);
}
