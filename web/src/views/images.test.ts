import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ImagePullProgress } from '../api';
import { type Routes, fakeEdtd, mount as mountView, tick, timedContext } from './fake-edtd';
import { imagesView } from './images';
import { checkPull, defaultPullName, kBusyPollMs, kIdlePollMs, parseReference, pulledMessage } from './pull';

const settle = async () => {
  for (let i = 0; i < 8; i++) await tick();
};

const kDigest = `sha256:${'ab12'.repeat(16)}`;
const edt = { name: 'edt', frameworks: ['horovod'], builtin: true, root: '/' };
const pytorch = { name: 'pytorch-24-05-py3', frameworks: ['deepspeed'], source: 'nvcr.io/nvidia/pytorch:24.05-py3' };

function pull(over: Partial<ImagePullProgress> = {}): ImagePullProgress {
  return { name: 'ubuntu-24-04', reference: 'docker.io/library/ubuntu:24.04', started_at: 1700000000, phase: 'fetching', layers: 10, layers_fetched: 3, layers_unpacked: 2, bytes: 40 * 2 ** 20, bytes_fetched: 10 * 2 ** 20, ...over };
}

function routes(admin: boolean, pulls: ImagePullProgress[] = []): Routes {
  return {
    'GET /whoami': { status: 200, body: { name: admin ? 'admin' : 'alice', admin } },
    'GET /images': { status: 200, body: { images: [edt, pytorch] } },
    'GET /images/pulls': { status: 200, body: { pulls } },
    'POST /images/pull': (body) => {
      const name = (body as { name?: string }).name ?? 'ubuntu-24-04';
      return { status: 201, body: { image: { name, frameworks: ['horovod'], source: 'docker.io/library/ubuntu:24.04' }, fetched_blobs: 4, fetched_bytes: 30 * 2 ** 20, reused_blobs: 1 } };
    },
  };
}

// The view against a fake edtd; a submit waits for the reload after it.
async function mount(r: Routes) {
  const v = await mountView(imagesView, r);
  await settle();
  const submit = async () => {
    await v.submit('#pull-form');
    await settle();
  };
  return { ...v, submit, posts: () => v.sent.filter(([k]) => k === 'POST /images/pull').map(([, b]) => b) };
}

describe('a reference, checked before edtd reads it', () => {
  it('says what is plainly wrong, never repeating the text', () => {
    expect(parseReference('')).toMatch(/Enter the image's reference/);
    expect(parseReference('ubuntu 24.04')).toMatch(/has a space/);
    expect(parseReference('https://nvcr.io/nvidia/pytorch:24.05')).toMatch(/no scheme/);
    expect(parseReference('ubuntu@sha256:abc')).toMatch(/64 lower-case hex digits/);
    expect(parseReference('user:secret@registry.example/team/x:1')).not.toMatch(/secret/);
    expect(parseReference('ubuntu:')).toMatch(/The tag/);
    expect(parseReference('ubuntu:-rc')).toMatch(/The tag/);
    expect(parseReference('NVIDIA/PyTorch:24.05')).toMatch(/lower-case/);
    expect(parseReference('registry.example//x:1')).toMatch(/single '\/'/);
    expect(parseReference('x'.repeat(513))).toMatch(/at most 512/);
  });

  it('reads references as Docker does, and names the image as edtd would', () => {
    const name = (text: string) => {
      const ref = parseReference(text);
      if (typeof ref === 'string') throw new Error(ref);
      return defaultPullName(ref);
    };
    expect(parseReference('ubuntu')).toEqual({ repository: 'ubuntu', tag: 'latest', digest: '' });
    expect(parseReference('127.0.0.1:5000/team/pytorch:24.05-py3')).toEqual({ repository: 'team/pytorch', tag: '24.05-py3', digest: '' });
    expect(parseReference(`localhost/x@${kDigest}`)).toEqual({ repository: 'x', tag: '', digest: kDigest });
    expect(name('nvcr.io/nvidia/pytorch:24.05-py3')).toBe('pytorch-24-05-py3');
    expect(name('127.0.0.1:5000/team/pytorch:24.05-py3')).toBe('pytorch-24-05-py3');
    expect(name('horovod/horovod')).toBe('horovod-latest');
    expect(name(`ghcr.io/org/train@${kDigest}`)).toBe(`train-${kDigest.slice(7, 19)}`);
    expect(name('r.example/a__b:_x')).toBe('a-b-x');
  });

  it('sends the credentials only with both, and asks for the missing one', () => {
    const input = { reference: 'ubuntu:24.04', name: '', username: '', password: '', frameworks: [] };
    expect(checkPull(input, []).request).toEqual({ reference: 'ubuntu:24.04' });
    const onlyUser = checkPull({ ...input, username: 'bob' }, []);
    expect(onlyUser.request).toEqual({ reference: 'ubuntu:24.04' });
    expect(onlyUser.problems).toContainEqual(['password', 'Give the registry password (or token) of bob, or clear the user.']);
    const onlyPassword = checkPull({ ...input, password: 's3cret' }, []);
    expect(onlyPassword.problems.find(([f]) => f === 'username')?.[1]).toMatch(/Give the registry user/);
    expect(JSON.stringify(onlyPassword.problems)).not.toMatch(/s3cret/);
    expect(checkPull({ ...input, name: 'u', username: 'bob', password: 'pw', frameworks: ['deepspeed'] }, []).request).toEqual({ reference: 'ubuntu:24.04', name: 'u', username: 'bob', password: 'pw', frameworks: ['deepspeed'] });
    expect(checkPull(input, ['ubuntu-24-04']).problems).toContainEqual(['name', `The default name "ubuntu-24-04" is an image's already; give this one another name.`]);
    expect(checkPull({ ...input, name: 'Bad_Name' }, []).problems.find(([f]) => f === 'name')?.[1]).toMatch(/not a DNS label/);
  });

  it('tells what a pull fetched', () => {
    expect(pulledMessage({ image: { name: 'u', frameworks: [] }, fetched_blobs: 4, fetched_bytes: 30 * 2 ** 20, reused_blobs: 1 })).toBe('Pulled image u: 4 blobs fetched (30.0 MiB), 1 reused.');
    expect(pulledMessage({ image: { name: 'u', frameworks: [] }, fetched_blobs: 1, fetched_bytes: 2 ** 19, reused_blobs: 0 })).toBe('Pulled image u: 1 blob fetched (0.5 MiB), 0 reused.');
  });
});

describe('the pull form, as the admin', () => {
  it('checks the reference and the credentials here, and sends nothing until they are right', async () => {
    const v = await mount(routes(true));
    await v.submit();
    expect(v.text('#pull-reference-error')).toMatch(/Enter the image's reference/);
    expect(document.activeElement?.id).toBe('pull-reference');
    v.type('#pull-reference', 'Ubuntu:24.04');
    v.type('#pull-username', 'bob');
    await v.submit();
    expect(v.text('#pull-reference-error')).toMatch(/lower-case/);
    expect(v.text('#pull-password-error')).toMatch(/password \(or token\) of bob/);
    v.type('#pull-reference', 'nvcr.io/nvidia/pytorch:24.05-py3');
    v.type('#pull-username', '');
    await v.submit();
    expect(v.text('#pull-name-error')).toMatch(/default name "pytorch-24-05-py3" is an image's already/);
    expect(v.posts()).toEqual([]);
  });

  it('pulls with the credentials, forgets the password, notifies and reloads', async () => {
    const v = await mount(routes(true));
    v.type('#pull-reference', 'registry.example/team/ubuntu:24.04');
    v.type('#pull-name', 'ubuntu');
    v.type('#pull-username', 'bob');
    v.type('#pull-password', 'pw');
    v.root.querySelector<HTMLInputElement>('#pull-framework-deepspeed')!.checked = true;
    const button = v.root.querySelector<HTMLButtonElement>('#image-pull')!;
    const imagesBefore = v.sent.filter(([k]) => k === 'GET /images').length;
    v.root.querySelector('#pull-form')!.dispatchEvent(new Event('submit', { cancelable: true }));
    // While the POST runs: the button is off, and the password is gone.
    expect(button.disabled).toBe(true);
    expect(v.root.querySelector<HTMLInputElement>('#pull-password')!.value).toBe('');
    await settle();
    expect(button.disabled).toBe(false);
    expect(v.posts()).toEqual([{ reference: 'registry.example/team/ubuntu:24.04', name: 'ubuntu', username: 'bob', password: 'pw', frameworks: ['deepspeed'] }]);
    expect(v.ctx.notify).toHaveBeenCalledWith('Pulled image ubuntu: 4 blobs fetched (30.0 MiB), 1 reused.');
    expect(v.sent.filter(([k]) => k === 'GET /images').length).toBe(imagesBefore + 1);
    expect(v.root.querySelector<HTMLInputElement>('#pull-reference')!.value).toBe('');
  });

  it('sends no credentials, name or frameworks that were not given; shows the name edtd will choose', async () => {
    const v = await mount(routes(true));
    const reference = v.root.querySelector<HTMLInputElement>('#pull-reference')!;
    reference.value = 'ubuntu:24.04';
    reference.dispatchEvent(new Event('input'));
    expect(v.root.querySelector<HTMLInputElement>('#pull-name')!.placeholder).toBe('ubuntu-24-04');
    await v.submit();
    expect(v.posts()).toEqual([{ reference: 'ubuntu:24.04' }]);
  });

  it("shows edtd's refusal next to the field it names", async () => {
    const r = routes(true);
    r['POST /images/pull'] = { status: 422, body: { error: { field: 'password', message: "registry r.example refused the credentials of user 'bob' for team/x (401)", fix: 'check them' } } };
    const v = await mount(r);
    v.type('#pull-reference', 'r.example/team/x:1');
    v.type('#pull-username', 'bob');
    v.type('#pull-password', 'wrong');
    await v.submit();
    expect(v.text('#pull-password-error')).toMatch(/refused the credentials of user 'bob'/);
    expect(v.root.querySelector<HTMLInputElement>('#pull-password')!.value).toBe('');
    expect(v.root.querySelector<HTMLButtonElement>('#image-pull')!.disabled).toBe(false);
    // The password is not kept: a retry without credentials is refused here.
    await v.submit();
    expect(v.text('#pull-password-error')).toMatch(/Give the registry password/);
    r['POST /images/pull'] = { status: 409, body: { error: { field: 'name', message: 'a pull of x-1 is under way', fix: 'wait for it' } } };
    v.type('#pull-username', '');
    await v.submit();
    expect(v.text('#pull-name-error')).toBe('a pull of x-1 is under way; wait for it');
  });
});

describe('the pulls under way', () => {
  it('shows each with its phase, layers and a progress bar, to every user', async () => {
    const v = await mount(routes(false, [pull(), pull({ name: 'x-1', reference: 'r.example/x:1', phase: 'resolving', layers: 0, layers_fetched: 0, layers_unpacked: 0, bytes: 0, bytes_fetched: 0 })]));
    expect(v.root.querySelector('#pull-form')).toBeNull();
    expect(v.root.querySelector<HTMLElement>('#pulls')!.hidden).toBe(false);
    const row = 'tr[data-pull="ubuntu-24-04"]';
    expect(v.text(`${row} th`)).toBe('ubuntu-24-04');
    expect(v.text(`${row} [data-phase]`)).toBe('fetching');
    expect(v.text(`${row} [data-col="layers"]`)).toBe('3/2 of 10');
    const bar = v.root.querySelector<HTMLProgressElement>(`${row} progress`)!;
    expect([bar.value, bar.max]).toEqual([10 * 2 ** 20, 40 * 2 ** 20]);
    expect(bar.getAttribute('aria-label')).toBe('Pull of ubuntu-24-04: 10.0 of 40.0 MiB fetched');
    expect(v.text(`${row} [data-col="fetched"]`)).toMatch(/10\.0 of 40\.0 MiB/);
    // Not resolved yet: no size, a bar with no value.
    expect(v.text('tr[data-pull="x-1"] [data-col="layers"]')).toBe('—');
    expect(v.root.querySelector('tr[data-pull="x-1"] progress')!.hasAttribute('value')).toBe(false);
  });

  it('is hidden when no pull is under way', async () => {
    const v = await mount(routes(true));
    expect(v.root.querySelector<HTMLElement>('#pulls')!.hidden).toBe(true);
    expect(v.root.querySelectorAll('#pulls-table tbody tr').length).toBe(0);
  });
});

describe('polling the pulls', () => {
  afterEach(() => vi.useRealTimers());

  async function start(r: Routes) {
    vi.useFakeTimers();
    const edtd = fakeEdtd(r);
    const { ctx, root, leave } = timedContext(edtd.fetch);
    await imagesView(ctx, root);
    await vi.advanceTimersByTimeAsync(0);
    const asked = () => edtd.sent.filter(([k]) => k === 'GET /images/pulls').length;
    return { root, leave, asked, sent: edtd.sent };
  }

  it('asks every 5 s while nothing is under way, every second while a pull is, and stops when the view is left', async () => {
    let pulls: ImagePullProgress[] = [];
    const r = routes(false);
    r['GET /images/pulls'] = () => ({ status: 200, body: { pulls } });
    const v = await start(r);
    expect(v.asked()).toBe(1);
    await vi.advanceTimersByTimeAsync(kIdlePollMs * 2);
    expect(v.asked()).toBe(3);
    pulls = [pull()];
    await vi.advanceTimersByTimeAsync(kIdlePollMs);
    const busyFrom = v.asked();
    await vi.advanceTimersByTimeAsync(kBusyPollMs * 4);
    expect(v.asked()).toBe(busyFrom + 4);
    expect(v.root.querySelector('tr[data-pull="ubuntu-24-04"]')).not.toBeNull();
    // The pull ends: its row goes and the images are read again.
    const images = v.sent.filter(([k]) => k === 'GET /images').length;
    pulls = [];
    await vi.advanceTimersByTimeAsync(kBusyPollMs);
    expect(v.root.querySelector('tr[data-pull]')).toBeNull();
    expect(v.sent.filter(([k]) => k === 'GET /images').length).toBe(images + 1);
    v.leave();
    const left = v.asked();
    await vi.advanceTimersByTimeAsync(kIdlePollMs * 4);
    expect(v.asked()).toBe(left);
  });

  it('asks every second while a pull this console started runs', async () => {
    let answer: (a: Response) => void = () => undefined;
    const r = routes(true);
    const edtd = fakeEdtd(r);
    // The POST answers only when the test says.
    const fetch = ((url: string, init?: RequestInit) => (init?.method === 'POST' ? new Promise<Response>((res) => (answer = res)) : edtd.fetch(url, init))) as typeof globalThis.fetch;
    vi.useFakeTimers();
    const { ctx, root, leave } = timedContext(fetch);
    await imagesView(ctx, root);
    await vi.advanceTimersByTimeAsync(0);
    const asked = () => edtd.sent.filter(([k]) => k === 'GET /images/pulls').length;
    await vi.advanceTimersByTimeAsync(kBusyPollMs);
    expect(asked()).toBe(1);
    root.querySelector<HTMLInputElement>('#pull-reference')!.value = 'ubuntu:24.04';
    root.querySelector('#pull-form')!.dispatchEvent(new Event('submit', { cancelable: true }));
    await vi.advanceTimersByTimeAsync(kBusyPollMs * 3);
    expect(asked()).toBe(4);
    answer(new Response(JSON.stringify({ image: { name: 'ubuntu-24-04', frameworks: ['horovod'] }, fetched_blobs: 3, fetched_bytes: 2 ** 20, reused_blobs: 0 }), { status: 201 }));
    await vi.advanceTimersByTimeAsync(kBusyPollMs * 3);
    expect(asked()).toBe(4);
    expect(ctx.notify).toHaveBeenCalledWith('Pulled image ubuntu-24-04: 3 blobs fetched (1.0 MiB), 0 reused.');
    leave();
  });
});
