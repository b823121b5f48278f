// Upload into a volume: several files, or a folder (its own folders kept),
// into a folder of the volume. Before anything is sent, the files that
// would be replaced are named and the user confirms; while it runs, a
// progress bar and "Uploading 2 of 5: ..." beside the button; edtd's refusal
// lands next to the control it concerns. A new pick resets the folder to
// the form's default, so an earlier upload's target is never reused unseen.

import { ApiError, type Api } from '../api';
import { h, replace } from '../dom';
import { confirmDialog } from './dialog';
import { type Field, clearErrors, field, plainMessage, showError } from './fields';

export interface UploadTarget {
  file: File;
  path: string; // in the volume
}

// Where each picked file goes: `folder`/its path in a picked folder (or its name).
export function uploadTargets(files: File[], folder: string): UploadTarget[] {
  const base = folder.trim().replace(/^\/+|\/+$/g, '');
  return files.map((file) => {
    const name = file.webkitRelativePath || file.name;
    return { file, path: base ? `${base}/${name}` : name };
  });
}

// The folder part of a path in a volume ('' for the top).
export function parentOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash);
}

// The targets that name a file the volume holds already. A folder not
// there yet holds none; another refusal (a bad path) is thrown.
export async function existingTargets(api: Api, volume: string, targets: UploadTarget[]): Promise<string[]> {
  const existing: string[] = [];
  for (const folder of new Set(targets.map((t) => parentOf(t.path)))) {
    let names: Set<string>;
    try {
      names = new Set((await api.listFiles(volume, folder)).entries.filter((e) => e.type === 'file').map((e) => e.name));
    } catch (err) {
      if (err instanceof ApiError && (err.status === 404 || err.status === 409)) continue;
      throw err;
    }
    existing.push(...targets.filter((t) => parentOf(t.path) === folder && names.has(t.path.slice(folder ? folder.length + 1 : 0))).map((t) => t.path));
  }
  return existing;
}

function confirmReplace(volume: string, paths: string[]): Promise<boolean> {
  const shown = paths.slice(0, 10);
  return confirmDialog({
    title: `Replace ${paths.length} file${paths.length > 1 ? 's' : ''} in ${volume}?`,
    body: h('div', {}, h('p', {}, 'These are in the volume already; the upload replaces them:'), h('ul', { class: 'mono' }, shown.map((p) => h('li', {}, p))), paths.length > shown.length ? h('p', {}, `and ${paths.length - shown.length} more.`) : null),
    confirm: 'Replace',
    danger: true,
  });
}

export interface UploadForm {
  el: HTMLElement;
  setVolumes(names: string[]): void;
  // The folder a new pick starts from (the files page's current folder).
  setFolder(folder: string): void;
}

function uploadFields(): Record<string, Field> {
  return {
    name: field('upload-volume', 'name', 'Volume', h('select', {})),
    file: field('upload-file', 'file', 'Files', h('input', { type: 'file', multiple: true }), 'One or several files.'),
    folder: field('upload-folder', 'folder', 'Or a folder', h('input', { type: 'file', webkitdirectory: true, multiple: true }), 'Its files, in its folders.'),
    path: field(
      'upload-path',
      'path',
      'Folder in the volume (optional)',
      h('input', { type: 'text', class: 'mono', autocomplete: 'off', spellcheck: 'false', placeholder: 'inputs' }),
      "Relative, e.g. inputs; folders are made. Empty: the volume's top. You are asked before a file there is replaced.",
    ),
  };
}

export function uploadForm(api: Api, notify: (message: string) => void, onUploaded: () => void = () => {}): UploadForm {
  const fields = uploadFields();
  const volume = fields['name'].control as HTMLSelectElement;
  const fileInput = fields['file'].control as HTMLInputElement;
  const folderInput = fields['folder'].control as HTMLInputElement;
  const pathInput = fields['path'].control as HTMLInputElement;
  const formError = h('p', { class: 'field-error', id: 'upload-form-error', role: 'alert' });
  const state = h('p', { class: 'muted', id: 'upload-state', role: 'status' });
  const progress = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true, 'aria-label': 'Upload progress' });
  const button = h('button', { type: 'submit', id: 'upload-submit' }, 'Upload');
  const form = h('form', { class: 'card form', id: 'upload-form', novalidate: true, 'aria-labelledby': 'upload-form-title' }, h('h2', { id: 'upload-form-title' }, 'Upload files'), Object.values(fields).map((f) => f.el), formError, h('div', { class: 'actions' }, button, progress, state));
  let defaultFolder = '';

  // A pick in one input empties the other: the last pick is what goes.
  const onPick = (other: HTMLInputElement) => () => {
    other.value = '';
    pathInput.value = defaultFolder;
    clearErrors(fields, formError, state);
  };
  fileInput.addEventListener('change', onPick(folderInput));
  folderInput.addEventListener('change', onPick(fileInput));

  async function send(targets: UploadTarget[]): Promise<number> {
    const total = targets.reduce((n, t) => n + t.file.size, 0);
    let done = 0;
    progress.max = Math.max(total, 1);
    progress.hidden = false;
    for (const [i, t] of targets.entries()) {
      state.textContent = `Uploading ${targets.length > 1 ? `${i + 1} of ${targets.length}: ` : ''}${t.path} (${t.file.size} bytes) to ${volume.value}…`;
      done += await api.uploadFile(volume.value, t.path, t.file, (sent) => (progress.value = done + sent));
    }
    return done;
  }

  function shown(err: unknown): void {
    state.textContent = 'Upload failed.';
    if (err instanceof ApiError && err.status === 413) {
      fields['file'].set(plainMessage(err));
      fileInput.focus();
    } else showError(err, fields, formError);
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError, state);
    const files = [...((folderInput.files?.length ? folderInput.files : fileInput.files) ?? [])];
    if (!volume.value) return fields['name'].set('Create a volume first.');
    if (!files.length) {
      fields['file'].set('Choose a file or a folder to upload.');
      return fileInput.focus();
    }
    const targets = uploadTargets(files, pathInput.value);
    button.disabled = true;
    try {
      const existing = await existingTargets(api, volume.value, targets);
      if (existing.length && !(await confirmReplace(volume.value, existing))) {
        state.textContent = 'Nothing uploaded.';
        return;
      }
      const bytes = await send(targets);
      state.textContent = targets.length === 1 ? `Uploaded ${bytes} bytes to ${volume.value} as ${targets[0].path}.` : `Uploaded ${targets.length} files (${bytes} bytes) to ${volume.value}.`;
      notify(targets.length === 1 ? `Uploaded ${targets[0].path} to ${volume.value}.` : `Uploaded ${targets.length} files to ${volume.value}.`);
      onUploaded();
    } catch (err) {
      shown(err);
    } finally {
      button.disabled = false;
      progress.hidden = true;
    }
  });
  return {
    el: form,
    setVolumes(names) {
      const chosen = volume.value;
      if (names.join() === [...volume.options].map((o) => o.value).join()) return;
      replace(volume, names.map((n) => h('option', { value: n, selected: n === chosen }, n)));
    },
    setFolder(folder) {
      if (pathInput.value === defaultFolder) pathInput.value = folder;
      defaultFolder = folder;
    },
  };
}
