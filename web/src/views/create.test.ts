import { beforeEach, describe, expect, it, vi } from 'vitest';
import { Api } from '../api';
import type { Context } from '../app';
import { createView } from './create';

// The form against a fake edtd: inventory answers, and a create that fails
// the way edtd fails, naming a field.
function fakeEdtd(createAnswer: { status: number; body: unknown }) {
  const posted: unknown[] = [];
  const fetch = vi.fn(async (url: string, init?: RequestInit) => {
    const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });
    if (init?.method === 'POST') {
      posted.push(JSON.parse(String(init.body)));
      return json(createAnswer.body, createAnswer.status);
    }
    if (url.endsWith('/images')) return json([{ name: 'edt', frameworks: ['horovod', 'deepspeed', 'megatron'] }]);
    if (url.endsWith('/gpus')) return json({ gpus: [0, 1, 2, 3].map((index) => ({ index, model: 'NVIDIA-P4', simulated: true, holder: index ? '' : 'old-launcher' })) });
    if (url.endsWith('/volumes')) return json([{ name: 'data' }]);
    if (url.endsWith('/clusters')) return json([{ name: 'old', framework: 'horovod', containers: 2 }]);
    return json({ error: 'not found' }, 404);
  });
  return { fetch: fetch as unknown as typeof globalThis.fetch, posted };
}

async function mount(createAnswer: { status: number; body: unknown }) {
  const edtd = fakeEdtd(createAnswer);
  const navigate = vi.fn();
  const ctx = { api: new Api({ token: () => 't', fetch: edtd.fetch }), navigate, notify: vi.fn() } as unknown as Context;
  document.body.replaceChildren();
  const root = document.createElement('main');
  document.body.append(root);
  await createView(ctx, root);
  const input = (field: string) => root.querySelector<HTMLInputElement>(`[data-field="${field}"]`)!;
  const errorOf = (field: string) => root.querySelector(`[data-error-for="${field}"]`)?.textContent ?? '';
  const type = (field: string, value: string) => {
    input(field).value = value;
    input(field).dispatchEvent(new Event('input', { bubbles: true }));
  };
  const submit = async () => {
    root.querySelector('form')!.dispatchEvent(new Event('submit', { cancelable: true }));
    await new Promise((r) => setTimeout(r, 0));
  };
  return { root, input, errorOf, type, submit, navigate, posted: edtd.posted };
}

describe('create form', () => {
  beforeEach(() => localStorage.clear());

  it('shows each bad field next to it and sends nothing', async () => {
    const f = await mount({ status: 201, body: {} });
    f.type('name', 'Bad_Name');
    f.type('containers', '1');
    await f.submit();
    expect(f.errorOf('name')).toContain('DNS label');
    expect(f.errorOf('containers')).toContain('at least 2');
    expect(f.input('name').getAttribute('aria-invalid')).toBe('true');
    expect(f.input('name').getAttribute('aria-describedby')).toContain(f.root.querySelector('[data-error-for="name"]')!.id);
    expect(document.activeElement).toBe(f.input('name'));
    expect(f.posted).toEqual([]);

    // Fixing a field clears its error as the user types.
    f.type('name', 'tthvd');
    expect(f.errorOf('name')).toBe('');
    expect(f.input('name').hasAttribute('aria-invalid')).toBe(false);
    expect(f.errorOf('containers')).toContain('at least 2');
  });

  it('refuses a taken name and GPUs over the platform\u2019s count (over the free ones queues)', async () => {
    const f = await mount({ status: 201, body: {} });
    f.type('name', 'old');
    (f.root.querySelector('#gpu-enabled') as HTMLInputElement).click();
    f.type('gpu.count', '2');
    await f.submit();
    expect(f.errorOf('gpu.count')).toBe('');
    f.type('gpu.count', '3');
    await f.submit();
    expect(f.errorOf('name')).toContain('exists already');
    expect(f.errorOf('gpu.count')).toBe('2 containers × 3 GPUs = 6 NVIDIA-P4, but this platform has only 4; ask for fewer.');
    expect(f.root.textContent).toContain('(simulated)');
  });

  it('puts edtd\u2019s error next to the field it names', async () => {
    const f = await mount({ status: 422, body: { error: { field: 'mounts[0].path', message: '/root/data is mounted read-only elsewhere' } } });
    f.type('name', 'tthvd');
    (f.root.querySelector('#add-mount') as HTMLButtonElement).click();
    await f.submit();
    expect(f.posted).toEqual([{ name: 'tthvd', framework: 'horovod', containers: 2, image: 'edt', mounts: [{ volume: 'data', path: '/root/data', read_only: false }] }]);
    expect(f.errorOf('mounts[0].path')).toBe('/root/data is mounted read-only elsewhere');
    expect(f.navigate).not.toHaveBeenCalled();
  });

  it('shows an error about no field at the top of the form, and goes to the cluster on success', async () => {
    const failing = await mount({ status: 503, body: { error: 'backend unavailable' } });
    failing.type('name', 'tthvd');
    await failing.submit();
    expect(failing.root.querySelector('#form-error')?.textContent).toBe('backend unavailable');

    const ok = await mount({ status: 201, body: { name: 'tthvd', framework: 'horovod', containers: 2 } });
    ok.type('name', 'tthvd');
    await ok.submit();
    expect(ok.navigate).toHaveBeenCalledWith('#/clusters/tthvd');
  });
  it('explains the chosen type and shows the Megatron-LM sizes only for it', async () => {
    const f = await mount({ status: 201, body: { name: 'tmg', framework: 'megatron', containers: 2 } });
    expect(f.root.querySelector('#framework-guide')?.textContent).toContain('edtrun');
    expect(f.root.querySelector('[data-field="megatron.tensor_parallel"]')).toBeNull();
    (f.root.querySelector('#framework-deepspeed') as HTMLInputElement).click();
    expect(f.root.querySelector('#framework-guide')?.textContent).toContain('/job/hostfile');
    expect(f.root.querySelector('[data-field="megatron.tensor_parallel"]')).toBeNull();
    (f.root.querySelector('#framework-megatron') as HTMLInputElement).click();
    expect(f.root.querySelector('#framework-guide')?.textContent).toContain('NODE_RANK');
    f.type('name', 'tmg');
    f.type('containers', '3');
    f.type('megatron.pipeline_parallel', '2');
    await f.submit();
    expect(f.errorOf('megatron')).toContain('3 GPUs, which tensor × pipeline = 2 does not divide');
    expect(f.posted).toEqual([]);
    f.type('containers', '2');
    await f.submit();
    expect(f.posted).toEqual([{ name: 'tmg', framework: 'megatron', containers: 2, image: 'edt', megatron: { pipeline_parallel: 2 } }]);
    expect(f.navigate).toHaveBeenCalledWith('#/clusters/tmg');
  });
});

describe('create form: elastic bounds and priority', () => {
  it('checks min <= containers <= max next to the fields and sends them with the priority', async () => {
    const f = await mount({ status: 201, body: { name: 'el' } });
    f.type('name', 'el');
    f.type('containers', '4');
    f.root.querySelector<HTMLInputElement>('#elastic-enabled')!.click();
    f.type('min_containers', '2');
    f.type('max_containers', '3');
    f.type('priority', '101');
    await f.submit();
    expect(f.errorOf('containers')).toContain('outside the elastic bounds 2..3');
    expect(f.errorOf('priority')).toContain('from 0 to 100');
    expect(f.posted).toEqual([]);
    f.type('max_containers', '8');
    f.type('priority', '50');
    await f.submit();
    expect(f.posted).toEqual([expect.objectContaining({ containers: 4, min_containers: 2, max_containers: 8, priority: 50 })]);
  });
});
