import { describe, expect, it, vi } from 'vitest';
import { Api, ApiError, errorFromBody, gpuModels, toCluster } from './api';

function respond(status: number, body: unknown): typeof fetch {
  return vi.fn(async () => new Response(typeof body === 'string' ? body : JSON.stringify(body), { status })) as unknown as typeof fetch;
}

describe('errors', () => {
  it('keeps the field the server names', () => {
    expect(errorFromBody(422, { error: { status: 422, field: 'containers', message: 'containers is 1, fewer than 2', fix: 'ask for at least 2 containers' } }, 'x')).toMatchObject({
      status: 422,
      message: 'containers is 1, fewer than 2; ask for at least 2 containers',
      field: 'containers',
    });
    expect(errorFromBody(409, { error: 'name taken', field: 'name' }, 'x')).toMatchObject({ message: 'name taken', field: 'name' });
    expect(errorFromBody(500, null, 'fallback')).toMatchObject({ message: 'fallback', field: undefined });
  });

  it('sends the token, and signs out on 401', async () => {
    const onUnauthorized = vi.fn();
    const fetch = respond(401, { error: { message: 'wrong token' } });
    const api = new Api({ token: () => 'secret', onUnauthorized, fetch });
    await expect(api.listClusters()).rejects.toEqual(new ApiError(401, 'wrong token'));
    expect(onUnauthorized).toHaveBeenCalledOnce();
    const init = (fetch as unknown as { mock: { calls: [string, RequestInit][] } }).mock.calls[0];
    expect(init[0]).toBe('/api/v1/clusters');
    expect((init[1].headers as Record<string, string>)['Authorization']).toBe('Bearer secret');
  });

  it('reports a body that is not JSON as the message', async () => {
    const api = new Api({ token: () => 't', fetch: respond(413, 'body over 1 MiB\n') });
    await expect(api.createCluster({ name: 'a', framework: 'horovod', containers: 2 })).rejects.toMatchObject({ status: 413, message: 'body over 1 MiB' });
  });
});

describe('toCluster', () => {
  it('reads spec and status', () => {
    const c = toCluster({
      name: 'tthvd',
      framework: 'horovod',
      containers: 2,
      image: 'edt',
      created_at: 1764430000,
      gpu: { model: 'P4', count: 1 },
      memory: '2 GiB',
      cpus: '1.5',
      status: {
        phase: 'Running',
        containers: [
          { name: 'tthvd-launcher', role: 'launcher', phase: 'Running', hostname: 'tthvd-launcher', address: '127.77.0.2', gpus: [0] },
          { name: 'tthvd-worker-0', phase: 'Creating', gpus: [1], started_at: 0 },
        ],
      },
    });
    expect(c).toMatchObject({ name: 'tthvd', containers: 2, phase: 'Running', gpu: { model: 'P4', count: 1 }, memory: '2 GiB', cpus: '1.5', created: '2025-11-29T15:26:40.000Z' });
    expect(c.container_status[1].started).toBeUndefined();
    expect(c.container_status.map((s) => [s.role, s.phase, s.gpus])).toEqual([
      ['launcher', 'Running', ['0']],
      ['worker', 'Creating', ['1']],
    ]);
  });

  it("reads a Slurm-placed container's node and job, and leaves them out on the local backend", () => {
    const c = toCluster({
      name: 'sl',
      framework: 'horovod',
      containers: 3,
      status: {
        phase: 'Scaling',
        containers: [
          { name: 'sl-launcher', role: 'launcher', phase: 'Running', message: '', node: 'edtsh-n1', slurm_job: 4 },
          { name: 'sl-worker-0', phase: 'Running', message: 'restarted after it stopped (Slurm job 4 on edtsh-n3 ended: CANCELLED)', node: 'edtsh-n2', slurm_job: 5 },
          { name: 'sl-worker-1', phase: 'Pending', message: 'Slurm job 6 is PENDING: Resources', node: '', slurm_job: 6 },
        ],
      },
    });
    expect(c.container_status.map((s) => [s.name, s.phase, s.node, s.slurm_job, s.message])).toEqual([
      ['sl-launcher', 'Running', 'edtsh-n1', 4, undefined],
      ['sl-worker-0', 'Running', 'edtsh-n2', 5, 'restarted after it stopped (Slurm job 4 on edtsh-n3 ended: CANCELLED)'],
      ['sl-worker-1', 'Pending', undefined, 6, 'Slurm job 6 is PENDING: Resources'],
    ]);

    const local = toCluster({ name: 'lo', containers: 2, status: { containers: [{ name: 'lo-launcher', role: 'launcher', phase: 'Running', message: '' }, { name: 'lo-worker-0', slurm_job: null, node: null }] } });
    for (const s of local.container_status) {
      expect(s.node).toBeUndefined();
      expect(s.slurm_job).toBeUndefined();
    }
  });
});

describe('listEvents', () => {
  it("reads edtd's events, oldest first", async () => {
    const fetch = respond(200, {
      events: [
        { time: '2026-11-29T17:58:16.123Z', type: 'Created', message: 'created by alice with 2 containers' },
        { time: '2026-11-29T17:58:17.004Z', type: 'Running', message: '2 of 2 containers Running' },
        { time: '2026-11-29T17:59:01.500Z', type: 'Scaling', message: 'scale from 2 to 4 containers by alice' },
      ],
    });
    const api = new Api({ token: () => 't', fetch });
    const events = await api.listEvents('tt hvd');
    expect((fetch as unknown as { mock: { calls: [string][] } }).mock.calls[0][0]).toBe('/api/v1/clusters/tt%20hvd/events');
    expect(events).toEqual([
      { time: '2026-11-29T17:58:16.123Z', type: 'Created', message: 'created by alice with 2 containers' },
      { time: '2026-11-29T17:58:17.004Z', type: 'Running', message: '2 of 2 containers Running' },
      { time: '2026-11-29T17:59:01.500Z', type: 'Scaling', message: 'scale from 2 to 4 containers by alice' },
    ]);
  });

  it('refuses a cluster edtd does not know', async () => {
    const api = new Api({ token: () => 't', fetch: respond(404, { error: { status: 404, field: 'name', message: "cluster 'x' does not exist", fix: 'see edt cluster list' } }) });
    await expect(api.listEvents('x')).rejects.toMatchObject({ status: 404, field: 'name' });
  });
});

describe('gpuModels', () => {
  it('counts devices per model and the free ones', () => {
    expect(
      gpuModels([
        { index: 0, model: 'NVIDIA-P4', simulated: true, holder: 'tthvd-launcher' },
        { index: 1, model: 'NVIDIA-P4', simulated: true, holder: '' },
        { index: 2, model: 'NVIDIA-P4', simulated: true },
        { index: 3, model: 'NVIDIA-H200', simulated: false, holder: '' },
      ]),
    ).toEqual([
      { model: 'NVIDIA-P4', total: 3, free: 2, simulated: true },
      { model: 'NVIDIA-H200', total: 1, free: 1, simulated: false },
    ]);
  });

  it("counts another user's GPUs, held but not named, as taken", () => {
    expect(
      gpuModels([
        { index: 0, model: 'NVIDIA-P4', simulated: true, holder: '', held: true },
        { index: 1, model: 'NVIDIA-P4', simulated: true, holder: '', held: false },
        { index: 2, model: 'NVIDIA-P4', simulated: true, holder: 'mine-launcher', held: true },
      ]),
    ).toEqual([{ model: 'NVIDIA-P4', total: 3, free: 1, simulated: true }]);
  });
});

describe('openJupyter', () => {
  it("posts to the cluster's jupyter route and returns the one-time link", async () => {
    const fetch = respond(201, { url: '/c/tthvd/jupyter/?edt_login=abc', expires_in: 300 });
    const api = new Api({ token: () => 't', fetch });
    expect(await api.openJupyter('tthvd')).toBe('/c/tthvd/jupyter/?edt_login=abc');
    const call = (fetch as unknown as { mock: { calls: [string, RequestInit][] } }).mock.calls[0];
    expect(call[0]).toBe('/api/v1/clusters/tthvd/jupyter');
    expect(call[1].method).toBe('POST');
  });

  it("passes on why the server cannot start", async () => {
    const api = new Api({ token: () => 't', fetch: respond(409, { error: { status: 409, field: 'image', message: 'Jupyter did not start in tthvd-launcher (image bare): the image has neither jupyter-lab nor jupyter-notebook on its PATH', fix: 'use an image with jupyter-notebook' } }) });
    await expect(api.openJupyter('tthvd')).rejects.toMatchObject({ status: 409, message: expect.stringContaining('neither jupyter-lab nor jupyter-notebook') });
  });
});
