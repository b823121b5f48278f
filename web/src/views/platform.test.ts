import { beforeEach, describe, expect, it } from 'vitest';
import { type Routes, confirmDialogsAtOnce, mount, tick } from './fake-edtd';
import { gpusView } from './gpus';
import { imagesView } from './images';
import { tokensView, usersView } from './users';
import { volumesView } from './volumes';

const admin = { 'GET /whoami': { status: 200, body: { name: 'admin', admin: true } } };

beforeEach(confirmDialogsAtOnce);

describe('volumes', () => {
  const routes: Routes = {
    ...admin,
    'GET /volumes': { status: 200, body: { volumes: [{ name: 'data', owner: 'admin', host_path: '/var/lib/edt/volumes/data', managed: true }] } },
    'GET /clusters': { status: 200, body: { clusters: [{ name: 'tthvd', framework: 'horovod', containers: 2, mounts: [{ volume: 'data', path: '/root/data' }] }] } },
    'DELETE /volumes/data': { status: 409, body: { error: { field: 'name', message: 'volume data is mounted by cluster tthvd', fix: 'delete the cluster first' } } },
    'POST /volumes': { status: 422, body: { error: { field: 'host_path', message: '/nope does not exist', fix: 'give an existing directory' } } },
  };

  it('lists who mounts a volume and shows a refused delete in its row', async () => {
    const v = await mount(volumesView, routes);
    expect(v.text('tr[data-volume="data"] [data-col="mounted-by"]')).toBe('tthvd');
    v.root.querySelector<HTMLButtonElement>('tr[data-volume="data"] button')!.click();
    for (let i = 0; i < 6; i++) await tick();
    expect(v.text('[data-row-error="data"]')).toBe('volume data is mounted by cluster tthvd; delete the cluster first');
  });

  it("checks the name first, then puts edtd's error next to the field it names", async () => {
    const v = await mount(volumesView, routes);
    v.type('#volume-name', 'data');
    await v.submit('#volume-form');
    expect(v.text('#volume-name-error')).toMatch(/A volume named "data" exists already/);
    expect(v.sent.some(([k]) => k === 'POST /volumes')).toBe(false);
    v.type('#volume-name', 'more');
    v.type('#volume-host-path', '/nope');
    await v.submit('#volume-form');
    expect(v.text('#volume-name-error')).toBe('');
    expect(v.text('#volume-host-path-error')).toBe('/nope does not exist; give an existing directory');
    expect(v.root.querySelector('#volume-host-path')!.getAttribute('aria-invalid')).toBe('true');
  });
});

describe('users and tokens', () => {
  const token = `edt_${'a'.repeat(64)}`;
  it("shows a new user's token once, and a refused delete in the user's row", async () => {
    let users = [{ name: 'admin', admin: true }];
    const u = await mount(usersView, {
      ...admin,
      'GET /users': () => ({ status: 200, body: { users } }),
      'POST /users': (body) => {
        users = [...users, { name: (body as { name: string }).name, admin: false }];
        return { status: 201, body: { name: 'alice', token, id: 2, expires_at: 0 } };
      },
      'DELETE /users/alice': { status: 409, body: { error: { message: 'alice owns cluster tthvd', fix: 'delete it first' } } },
    });
    u.type('#user-name', 'alice');
    await u.submit('#user-form');
    expect(u.text('#new-token')).toBe(token);
    expect(u.root.querySelector('#new-token-copy')).not.toBeNull();
    expect(u.root.querySelector('tr[data-user="alice"]')).not.toBeNull();
    u.root.querySelector<HTMLButtonElement>('tr[data-user="alice"] button')!.click();
    for (let i = 0; i < 6; i++) await tick();
    expect(u.text('[data-row-error="alice"]')).toBe('alice owns cluster tthvd; delete it first');
    expect(u.root.querySelector('tr[data-user="admin"] button')).toBeNull();
  });

  it('a user who is not the admin sees their own tokens; a bad lifetime is caught before asking', async () => {
    const t = await mount(usersView, {
      'GET /whoami': { status: 200, body: { name: 'bob', admin: false } },
      'GET /users/bob/tokens': { status: 200, body: { tokens: [{ id: 4, user: 'bob', description: 'laptop', created_at: 1764430000, expires_at: 1764430001, expired: true }] } },
      'POST /users/bob/tokens': { status: 201, body: { name: 'bob', token, id: 5, expires_at: 0 } },
    });
    expect(t.text('h1')).toBe('Your tokens');
    expect(t.text('tr[data-token="4"] [data-col="state"]')).toBe('Expired');
    t.type('#token-expires', '2w');
    await t.submit('#token-form');
    expect(t.text('#token-expires-error')).toMatch(/"2w" is not a lifetime/);
    expect(t.sent.some(([k]) => k.startsWith('POST'))).toBe(false);
    t.type('#token-expires', '90d');
    t.type('#token-description', 'ci');
    await t.submit('#token-form');
    expect(t.sent.find(([k]) => k === 'POST /users/bob/tokens')?.[1]).toEqual({ expires_in: '90d', description: 'ci' });
    expect(t.text('#new-token')).toBe(token);
  });

  it("shows a refused revoke in the token's row", async () => {
    const t = await mount(
      tokensView,
      {
        ...admin,
        'GET /users/admin/tokens': { status: 200, body: { tokens: [{ id: 1, user: 'admin', description: '', created_at: 0, expires_at: 0, expired: false }] } },
        'DELETE /users/admin/tokens/1': { status: 409, body: { error: { message: "token 1 is the admin's last valid token", fix: 'make another first' } } },
      },
      { name: 'admin' },
    );
    t.root.querySelector<HTMLButtonElement>('tr[data-token="1"] button')!.click();
    for (let i = 0; i < 6; i++) await tick();
    expect(t.text('[data-row-error="1"]')).toBe("token 1 is the admin's last valid token; make another first");
  });
});

describe('images', () => {
  it('the admin registers one; a missing framework is caught, edtd names a bad root', async () => {
    const i = await mount(imagesView, {
      ...admin,
      'GET /images': { status: 200, body: { images: [{ name: 'edt', root: '/', frameworks: ['horovod'], builtin: true }] } },
      'GET /images/pulls': { status: 200, body: { pulls: [] } },
      'POST /images': { status: 422, body: { error: { field: 'root', message: '/srv/x has no /usr', fix: 'unpack a root file system there' } } },
    });
    expect(i.text('tr[data-image="edt"]')).toContain('Horovod');
    i.type('#image-name', 'torch');
    i.type('#image-root', '/srv/x');
    await i.submit('#image-form');
    expect(i.text('#image-frameworks-error')).toMatch(/at least one framework/);
    i.root.querySelector<HTMLInputElement>('#image-framework-deepspeed')!.checked = true;
    await i.submit('#image-form');
    expect(i.sent.find(([k]) => k === 'POST /images')?.[1]).toEqual({ name: 'torch', root: '/srv/x', frameworks: ['deepspeed'] });
    expect(i.text('#image-root-error')).toBe('/srv/x has no /usr; unpack a root file system there');
  });
});

describe('GPUs', () => {
  it('names the holder and its cluster, and another user\'s GPU only as held', async () => {
    const g = await mount(gpusView, {
      'GET /gpus': { status: 200, body: { gpus: [
        { index: 0, model: 'NVIDIA-P4', simulated: true, holder: 'tthvd-launcher', held: true },
        { index: 1, model: 'NVIDIA-P4', simulated: true, holder: '', held: true },
        { index: 2, model: 'NVIDIA-P4', simulated: true, holder: '', held: false },
      ] } },
      'GET /clusters': { status: 200, body: { clusters: [{ name: 'tthvd', framework: 'horovod', containers: 2, status: { containers: [{ name: 'tthvd-launcher' }] } }] } },
    });
    expect(g.text('#gpus-summary')).toBe('1 of 3 free.');
    expect(g.text('tr[data-gpu="0"] [data-col="holder"]')).toBe('tthvd-launcher');
    expect(g.root.querySelector('tr[data-gpu="0"] [data-col="cluster"] a')?.getAttribute('href')).toBe('#/clusters/tthvd');
    expect(g.text('tr[data-gpu="1"] [data-col="holder"]')).toBe("another user's");
    expect(g.root.querySelector('tr[data-gpu="2"]')?.getAttribute('data-state')).toBe('free');
  });
});

describe('volume upload', () => {
  const routes: Routes = {
    ...admin,
    'GET /volumes': { status: 200, body: { volumes: [{ name: 'data', owner: 'admin', host_path: '/v/data', managed: true }] } },
    'GET /clusters': { status: 200, body: { clusters: [] } },
    'GET /volumes/data/files?path=dir': { status: 200, body: { entries: [{ name: 'old.txt', type: 'file', bytes: 3, modified: 1 }], truncated: false } },
    'PUT /volumes/data/files?path=dir%2Fa%20b.txt': { status: 200, body: { volume: 'data', path: 'dir/a b.txt', bytes: 5 } },
    'PUT /volumes/data/files?path=dir%2Fold.txt': { status: 200, body: { volume: 'data', path: 'dir/old.txt', bytes: 2 } },
    'PUT /volumes/data/files?path=set%2Fone.txt': { status: 200, body: { bytes: 1 } },
    'PUT /volumes/data/files?path=set%2Fsub%2Ftwo.txt': { status: 200, body: { bytes: 2 } },
    'GET /volumes/data/files?path=..': { status: 400, body: { error: { field: 'path', message: "the file's path '..' has a '..' segment", fix: 'give a relative path' } } },
    'PUT /volumes/data/files?path=big.bin': { status: 413, body: { error: { field: '', message: 'the request body is over 32 MiB', fix: 'send a smaller body' } } },
  };
  const choose = (root: HTMLElement, files: File[], input = '#upload-file') => {
    const el = root.querySelector(input)!;
    Object.defineProperty(el, 'files', { value: files, configurable: true });
    el.dispatchEvent(new Event('change'));
  };
  const inFolder = (name: string, relative: string) => Object.defineProperty(new File(['x'.repeat(relative.length % 3)], name), 'webkitRelativePath', { value: relative });
  const puts = (sent: [string, unknown][]) => sent.filter(([k]) => k.startsWith('PUT')).map(([k]) => k);

  it('sends the file as the body into the folder given and says it is done', async () => {
    const v = await mount(volumesView, routes);
    expect(v.root.querySelector<HTMLSelectElement>('#upload-volume')!.value).toBe('data');
    choose(v.root, [new File(['hello'], 'a b.txt')]);
    v.type('#upload-path', 'dir');
    await v.submit('#upload-form');
    expect(v.text('#upload-state')).toBe('Uploaded 5 bytes to data as dir/a b.txt.');
    const [key, body] = v.sent.find(([k]) => k.startsWith('PUT'))!;
    expect(key).toBe('PUT /volumes/data/files?path=dir%2Fa%20b.txt');
    expect((body as File).name).toBe('a b.txt');
    expect((body as File).size).toBe(5);
  });

  it('a new pick empties the folder an earlier upload used', async () => {
    const v = await mount(volumesView, routes);
    choose(v.root, [new File(['hello'], 'a b.txt')]);
    v.type('#upload-path', 'dir');
    await v.submit('#upload-form');
    choose(v.root, [new File(['x'], 'other.txt')]);
    expect(v.root.querySelector<HTMLInputElement>('#upload-path')!.value).toBe('');
  });

  it('uploads a folder, its own folders kept, one file after another', async () => {
    const v = await mount(volumesView, routes);
    choose(v.root, [inFolder('one.txt', 'set/one.txt'), inFolder('two.txt', 'set/sub/two.txt')], '#upload-folder');
    await v.submit('#upload-form');
    expect(puts(v.sent)).toEqual(['PUT /volumes/data/files?path=set%2Fone.txt', 'PUT /volumes/data/files?path=set%2Fsub%2Ftwo.txt']);
    expect(v.text('#upload-state')).toBe('Uploaded 2 files (3 bytes) to data.');
  });

  it('asks before it replaces a file, and sends nothing when told no', async () => {
    HTMLDialogElement.prototype.showModal = function (this: HTMLDialogElement) {
      this.returnValue = 'cancel';
      queueMicrotask(() => this.dispatchEvent(new Event('close')));
    };
    const v = await mount(volumesView, routes);
    choose(v.root, [new File(['hi'], 'old.txt')]);
    v.type('#upload-path', 'dir');
    await v.submit('#upload-form');
    expect(document.querySelector('dialog')).toBeNull();
    expect(v.text('#upload-state')).toBe('Nothing uploaded.');
    expect(puts(v.sent)).toEqual([]);
  });

  it("shows edtd's refusal next to what caused it", async () => {
    const v = await mount(volumesView, routes);
    choose(v.root, [new File(['x'], 'x')]);
    v.type('#upload-path', '..');
    await v.submit('#upload-form');
    expect(v.text('#upload-path-error')).toMatch(/has a '\.\.' segment/);
    expect(v.text('#upload-state')).toBe('Upload failed.');
    choose(v.root, [new File(['x'], 'big.bin')]);
    await v.submit('#upload-form');
    expect(v.text('#upload-file-error')).toMatch(/over 32 MiB/);
    expect(v.text('#upload-path-error')).toBe('');
  });

  it('asks for a file before sending anything', async () => {
    const v = await mount(volumesView, routes);
    await v.submit('#upload-form');
    expect(v.text('#upload-file-error')).toBe('Choose a file or a folder to upload.');
    expect(v.sent.some(([k]) => k.startsWith('PUT'))).toBe(false);
  });
});
