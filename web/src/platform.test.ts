import { describe, expect, it, vi } from 'vitest';
import { Api, toCluster, toGpu } from './api';
import { checkResourceName, checkTokenDescription, checkTokenLifetime, clusterOf, gpuRows, mountedBy } from './platform';

function respond(status: number, body: unknown) {
  return vi.fn(async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch & { mock: { calls: [string, RequestInit][] } };
}

const tthvd = toCluster({
  name: 'tthvd',
  framework: 'horovod',
  containers: 2,
  mounts: [{ volume: 'data', path: '/root/data' }, { volume: 'data', path: '/root/again' }],
  status: { containers: [{ name: 'tthvd-launcher' }, { name: 'tthvd-worker-0' }] },
});
const other = toCluster({ name: 'b', framework: 'horovod', containers: 2, mounts: [{ volume: 'data', path: '/d' }, { volume: 'gone', path: '/g' }] });

describe('resource names', () => {
  it('takes a DNS label that is not taken', () => {
    expect(checkResourceName('data-1', 'volume')).toBeNull();
    expect(checkResourceName('', 'user')).toMatch(/Give the user a name, e.g. alice/);
    expect(checkResourceName('Data', 'volume')).toMatch(/"Data" is not a DNS label/);
    expect(checkResourceName('-a', 'volume')).toMatch(/not a DNS label/);
    expect(checkResourceName('a'.repeat(64), 'image')).toMatch(/64 characters; at most 63/);
    expect(checkResourceName('data', 'volume', ['data'])).toMatch(/A volume named "data" exists already/);
  });
});

describe('token lifetimes', () => {
  it("follows the contract's grammar and range", () => {
    for (const ok of ['', '1s', '90d', '12h', '30m', '3600', '365d']) expect(checkTokenLifetime(ok), ok).toBeNull();
    expect(checkTokenLifetime('0s')).toMatch(/shorter than 1s/);
    expect(checkTokenLifetime('366d')).toMatch(/longer than 365d/);
    expect(checkTokenLifetime('1.5h')).toMatch(/not a lifetime/);
    expect(checkTokenLifetime('2w')).toMatch(/not a lifetime/);
    expect(checkTokenLifetime('-1d')).toMatch(/not a lifetime/);
  });

  it('limits descriptions to 200 characters', () => {
    expect(checkTokenDescription('ci runner')).toBeNull();
    expect(checkTokenDescription('x'.repeat(201))).toMatch(/201 characters; at most 200/);
  });
});

describe('which clusters mount a volume', () => {
  it('lists each cluster once, and volumes no cluster mounts with none', () => {
    const by = mountedBy([{ name: 'data' }, { name: 'free' }], [tthvd, other]);
    expect(Object.fromEntries(by)).toEqual({ data: ['tthvd', 'b'], free: [] });
  });
});

describe('GPU holders', () => {
  it('names the cluster of a holder from the clusters, or from its name', () => {
    expect(clusterOf('tthvd-worker-0', [tthvd])).toBe('tthvd');
    expect(clusterOf('x-y-worker-12', [])).toBe('x-y');
    expect(clusterOf('x-launcher', [])).toBe('x');
    expect(clusterOf('odd', [])).toBe('');
  });

  it("tells free, another user's and the caller's GPUs apart, in index order", () => {
    const gpus = [
      { index: 2, model: 'P4', simulated: true, holder: '', held: false },
      { index: 0, model: 'P4', simulated: true, holder: 'tthvd-launcher', held: true },
      { index: 1, model: 'P4', simulated: true, holder: '', held: true },
    ].map(toGpu);
    expect(gpuRows(gpus, [tthvd]).map((r) => [r.index, r.state, r.holder, r.cluster])).toEqual([
      [0, 'named', 'tthvd-launcher', 'tthvd'],
      [1, 'held', '', ''],
      [2, 'free', '', ''],
    ]);
  });
});

describe('the platform calls', () => {
  it('runs a job in the container picked, and in the launcher without one', async () => {
    const fetch = respond(201, { id: 7, cluster: 'tthvd', container: 'tthvd-worker-0', state: 'Running' });
    const api = new Api({ token: () => 't', fetch });
    expect(await api.runJob('tthvd', 'hostname', 'tthvd-worker-0')).toMatchObject({ id: '7', container: 'tthvd-worker-0' });
    await api.runJob('tthvd', 'hostname');
    expect(fetch.mock.calls.map(([, init]) => JSON.parse(String(init.body)))).toEqual([{ command: 'hostname', container: 'tthvd-worker-0' }, { command: 'hostname' }]);
  });

  it('reads tokens, and revokes by user and id', async () => {
    const list = respond(200, { tokens: [{ id: 3, user: 'alice', description: 'ci', created_at: 1764430000, expires_at: 0, expired: false }] });
    expect(await new Api({ token: () => 't', fetch: list }).listTokens('alice')).toEqual([{ id: 3, user: 'alice', description: 'ci', created_at: 1764430000, expires_at: 0, expired: false }]);
    expect(list.mock.calls[0][0]).toBe('/api/v1/users/alice/tokens');
    const revoke = respond(200, { deleted: '3' });
    await new Api({ token: () => 't', fetch: revoke }).revokeToken('alice', 3);
    expect(revoke.mock.calls[0]).toMatchObject(['/api/v1/users/alice/tokens/3', { method: 'DELETE' }]);
  });

  it("keeps a delete's refusal with its status and message", async () => {
    const api = new Api({ token: () => 't', fetch: respond(409, { error: { status: 409, field: 'name', message: "volume data is mounted by cluster tthvd", fix: 'delete the cluster first' } }) });
    await expect(api.deleteVolume('data')).rejects.toMatchObject({ status: 409, message: 'volume data is mounted by cluster tthvd; delete the cluster first' });
  });
});
