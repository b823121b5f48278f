// The client of edtd's public REST API (/api/v1), the only thing the console
// talks to. Every call carries the bearer token; every failure becomes an
// ApiError that keeps the HTTP status and, when the server names one, the
// field the error concerns, so forms can show it next to that field.

import type * as wire from './generated/api';

// The request bodies and enumerations are the API contract's (generated from
// api/openapi.json); the shapes below them are what the console shows, read
// leniently from the server's JSON by the to* functions.
export type Framework = wire.Framework;
// A phase a newer edtd adds is shown as written.
export type Phase = wire.ClusterPhase | wire.ContainerPhase | wire.JobState | string;
export type ClusterSpec = wire.ClusterSpec;

export interface Mount {
  volume: string;
  path: string;
  read_only?: boolean;
}

export interface GpuRequest {
  model: string;
  count: number;
}

export interface Container {
  name: string;
  role: string;
  phase: Phase;
  hostname: string;
  address: string;
  gpus: string[];
  started?: string;
  message?: string;
  // edtd --backend slurm only (absent on the local backend): the Slurm node
  // it runs on (absent too while its job is pending) and the job that holds it.
  node?: string;
  slurm_job?: number;
}

export interface ClusterEvent {
  time: string;
  type: string;
  message: string;
}

export interface Cluster {
  name: string;
  framework: Framework;
  containers: number;
  image?: string;
  gpu?: GpuRequest;
  shm?: string;
  memory?: string; // per container; absent: no bound
  cpus?: string; // per container, e.g. "1.5"; absent: no bound
  drain_timeout?: string;
  mounts?: Mount[];
  env?: Record<string, string>;
  phase: Phase;
  message: string;
  // A create or scale waiting for GPUs (docs/scheduling.md): its place in its GPU model's queue.
  queued?: { containers: number; position: number; reason: string };
  created?: string;
  container_status: Container[];
  events: ClusterEvent[];
}

export interface Image {
  name: string;
  frameworks: string[];
  description?: string;
  root?: string;
  builtin?: boolean;
  source?: string; // an imported image: the path on edtd's host it came from
  size_bytes?: number; // an imported image: its unpacked bytes
}

// A pull's answer: the image, and what was fetched for it and what the
// store had already.
export interface ImagePulled {
  image: Image;
  fetched_blobs: number;
  fetched_bytes: number;
  reused_blobs: number;
}

// A pull under way and how far it has come (GET /images/pulls). A phase a
// newer edtd adds is shown as written.
export type ImagePullProgress = Omit<wire.ImagePullProgress, 'phase'> & { phase: wire.ImagePullProgress['phase'] | string };

// One GPU of the inventory. holder names the container that holds it when
// the caller may know (its own, or any for the admin); held tells whether
// any container holds it.
export interface Gpu {
  index: number;
  model: string;
  simulated: boolean;
  holder: string;
  held: boolean;
}

export interface User {
  name: string;
  admin: boolean;
}

// A token as lists show it: never the token itself. Times are unix seconds,
// 0 for never (expires_at) or not recorded (created_at).
export interface TokenInfo {
  id: number;
  user: string;
  description: string;
  created_at: number;
  expires_at: number;
  expired: boolean;
}

// A token just made: the only time its text is seen.
export interface NewToken {
  name: string;
  token: string;
  id: number;
  expires_at: number;
}

export interface GpuModel {
  model: string;
  total: number;
  free: number;
  simulated: boolean;
}

export interface Volume {
  name: string;
  host_path?: string;
  owner?: string;
  managed?: boolean;
}

// One entry of a volume's directory (GET /volumes/{name}/files).
export interface VolumeEntry {
  name: string;
  type: 'file' | 'directory' | 'link' | 'other';
  bytes: number;
  modified: number; // unix seconds
}

export interface VolumeListing {
  entries: VolumeEntry[];
  truncated: boolean;
}

// How far an upload is: bytes sent of the total.
export type Progress = (sent: number, total: number) => void;

export interface Job {
  id: string;
  cluster: string;
  container?: string;
  command: string;
  phase: string;
  exit_code: number | null;
  started?: string;
  finished?: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

type Json = Record<string, unknown>;

function str(v: unknown, fallback = ''): string {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : fallback;
}

function num(v: unknown, fallback = 0): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}

// A number when there is one (a count or id sent as text too), else undefined.
function optNum(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined;
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function obj(v: unknown): Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};
}

// A list comes either bare or wrapped as {"<key>": [...]}.
function list(body: unknown, key: string): unknown[] {
  return Array.isArray(body) ? body : arr(obj(body)[key] ?? obj(body)['items']);
}

// edtd's error body names the field, what was wrong and what to do:
// {"error": {"status", "field", "message", "fix"}}. The message shown is
// "what; fix". A plain {"error": "..."} (from a proxy, say) is read too.
export function errorFromBody(status: number, body: unknown, fallback: string): ApiError {
  const top = obj(body);
  const inner = obj(top['error']);
  const what = str(inner['message']) || str(top['error']) || str(top['message']) || fallback;
  const fix = str(inner['fix']) || str(top['fix']);
  const field = str(inner['field']) || str(top['field']) || undefined;
  return new ApiError(status, fix ? `${what}; ${fix}` : what, field);
}

// A time as ISO text, from ISO text or unix seconds (0 means not yet).
function time(v: unknown): string | undefined {
  if (typeof v === 'number') return v > 0 ? new Date(v * 1000).toISOString() : undefined;
  return str(v) || undefined;
}

function gpuList(v: unknown): string[] {
  if (typeof v === 'number') return v > 0 ? Array.from({ length: v }, (_, i) => String(i)) : [];
  return arr(v).map((g) => (typeof g === 'object' ? str(obj(g)['index'] ?? obj(g)['id']) : str(g)));
}

function toContainer(v: unknown): Container {
  const c = obj(v);
  return {
    name: str(c['name']),
    role: str(c['role']) || (str(c['name']).endsWith('-launcher') ? 'launcher' : 'worker'),
    phase: str(c['phase'], 'Pending'),
    hostname: str(c['hostname']),
    address: str(c['address']),
    gpus: gpuList(c['gpus']),
    started: time(c['started_at'] ?? c['started']),
    message: str(c['message']) || undefined,
    node: str(c['node']) || undefined,
    slurm_job: optNum(c['slurm_job']),
  };
}

// edtd's event: {"time": "2026-11-29T17:58:16.123Z" (UTC), "type": "Created" |
// "Scaling" | "Running" | "Failed" | "Restarted" | "Deleting", "message"}.
function toEvent(v: unknown): ClusterEvent {
  const e = obj(v);
  return { time: str(e['time']), type: str(e['type']), message: str(e['message']) };
}

// A cluster as the console uses it, from the server's JSON: the spec at the
// top level (or under "spec") and the observed state under "status".
export function toCluster(v: unknown): Cluster {
  const top = obj(v);
  const spec = Object.keys(obj(top['spec'])).length ? obj(top['spec']) : top;
  const status = obj(top['status']);
  const gpu = obj(spec['gpu']);
  const containers = spec['containers'];
  return {
    name: str(top['name']) || str(spec['name']),
    framework: str(spec['framework']) as Framework,
    containers: typeof containers === 'number' ? containers : arr(containers).length,
    image: str(spec['image']) || undefined,
    gpu: str(gpu['model']) ? { model: str(gpu['model']), count: num(gpu['count']) } : undefined,
    shm: str(spec['shm']) || str(spec['shm_size']) || undefined,
    memory: str(spec['memory']) || undefined,
    cpus: str(spec['cpus']) || undefined,
    drain_timeout: str(spec['drain_timeout']) || undefined,
    mounts: arr(spec['mounts']).map((m) => {
      const o = obj(m);
      return { volume: str(o['volume']), path: str(o['path']), read_only: o['read_only'] === true };
    }),
    env: obj(spec['env']) as Record<string, string>,
    phase: str(status['phase']) || str(top['phase'], 'Pending'),
    message: str(status['message']) || str(top['message']),
    queued: status['queued'] ? { containers: num(obj(status['queued'])['containers']), position: num(obj(status['queued'])['position']), reason: str(obj(status['queued'])['reason']) } : undefined,
    created: time(top['created_at'] ?? top['created']),
    container_status: arr(status['containers'] ?? (Array.isArray(containers) ? containers : [])).map(toContainer),
    events: arr(top['events'] ?? status['events']).map(toEvent),
  };
}

export function gpuModels(devices: unknown[]): GpuModel[] {
  const models = new Map<string, GpuModel>();
  for (const d of devices.map(obj)) {
    const model = str(d['model']);
    const m = models.get(model) ?? { model, total: 0, free: 0, simulated: false };
    m.total += 1;
    // Another user's holder is not named to us: `held` tells it is taken.
    if (d['held'] !== true && !str(d['holder'])) m.free += 1;
    m.simulated ||= d['simulated'] === true;
    models.set(model, m);
  }
  return [...models.values()];
}

function toJob(v: unknown): Job {
  const j = obj(v);
  const code = j['exit_code'];
  return {
    id: str(j['id']),
    cluster: str(j['cluster']),
    container: str(j['container']) || undefined,
    command: Array.isArray(j['command']) ? (j['command'] as unknown[]).map((c) => str(c)).join(' ') : str(j['command']),
    phase: str(j['phase']) || str(j['state']) || str(j['status'], 'Running'),
    // edtd reports -1 until the job ends.
    exit_code: typeof code === 'number' && code >= 0 ? code : null,
    started: time(j['created_at'] ?? j['started_at'] ?? j['started']),
    finished: time(j['finished_at'] ?? j['finished']),
  };
}

function toImage(v: unknown): Image {
  const o = obj(v);
  return {
    name: str(o['name']),
    frameworks: arr(o['frameworks']).map((f) => str(f)),
    description: str(o['description']) || undefined,
    root: str(o['root']) || undefined,
    builtin: o['builtin'] === true,
    source: str(o['source']) || undefined,
    size_bytes: num(o['size_bytes']) || undefined,
  };
}

function toPulled(v: unknown): ImagePulled {
  const o = obj(v);
  return { image: toImage(o['image']), fetched_blobs: num(o['fetched_blobs']), fetched_bytes: num(o['fetched_bytes']), reused_blobs: num(o['reused_blobs']) };
}

function toPullProgress(v: unknown): ImagePullProgress {
  const o = obj(v);
  return {
    name: str(o['name']),
    reference: str(o['reference']),
    started_at: num(o['started_at']),
    phase: str(o['phase'], 'waiting'),
    layers: num(o['layers']),
    layers_fetched: num(o['layers_fetched']),
    layers_unpacked: num(o['layers_unpacked']),
    bytes: num(o['bytes']),
    bytes_fetched: num(o['bytes_fetched']),
  };
}

// /volumes/NAME/WHAT?path=PATH (no path: the volume's top).
function filesRoute(volume: string, what: string, path: string): string {
  return `/volumes/${encodeURIComponent(volume)}/${what}${path ? `?path=${encodeURIComponent(path)}` : ''}`;
}

function toVolumeEntry(v: unknown): VolumeEntry {
  const o = obj(v);
  const type = str(o['type']);
  return { name: str(o['name']), type: (['file', 'directory', 'link'].includes(type) ? type : 'other') as VolumeEntry['type'], bytes: num(o['bytes']), modified: num(o['modified']) };
}

function toVolume(v: unknown): Volume {
  const o = obj(v);
  return { name: str(o['name']), host_path: str(o['host_path']) || undefined, owner: str(o['owner']) || undefined, managed: o['managed'] === true };
}

export function toGpu(v: unknown): Gpu {
  const o = obj(v);
  const holder = str(o['holder']);
  return { index: num(o['index']), model: str(o['model']), simulated: o['simulated'] === true, holder, held: o['held'] === true || holder !== '' };
}

// A team with its members and, per GPU model, its quota and usage (GET /teams).
export type Team = wire.Team;
export type QuotaUsage = wire.QuotaUsage;

export function toTeam(v: unknown): Team {
  const o = obj(v);
  const quota = (q: unknown): QuotaUsage => {
    const u = obj(q);
    return { gpu_model: str(u['gpu_model']), guaranteed: num(u['guaranteed']), borrow_limit: num(u['borrow_limit']), in_use: num(u['in_use']), borrowed: num(u['borrowed']), pending: num(u['pending']) };
  };
  return { name: str(o['name']), members: arr(o['members']).map((m) => str(m)), quotas: arr(o['quotas']).map(quota) };
}

export function toTokenInfo(v: unknown): TokenInfo {
  const o = obj(v);
  return {
    id: num(o['id']),
    user: str(o['user']),
    description: str(o['description']),
    created_at: num(o['created_at']),
    expires_at: num(o['expires_at']),
    expired: o['expired'] === true,
  };
}

function toNewToken(v: unknown): NewToken {
  const o = obj(v);
  return { name: str(o['name']), token: str(o['token']), id: num(o['id']), expires_at: num(o['expires_at']) };
}

// What GET /clusters/{name}/events and /jobs select; an empty field selects all.
export interface EventFilter {
  type?: string;
  since?: string; // UTC, as an event's time is written
}
export interface JobFilter {
  state?: string;
  container?: string;
}

// "?a=1&b=2" of the filter's non-empty fields; "" when there are none.
export function query(filter: object): string {
  const pairs = Object.entries(filter).filter(([, v]) => typeof v === 'string' && v !== '');
  return pairs.length ? '?' + pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v as string)}`).join('&') : '';
}

export interface ApiOptions {
  base?: string;
  token: () => string | null;
  onUnauthorized?: () => void;
  fetch?: typeof fetch;
}

export class Api {
  private readonly base: string;

  constructor(private readonly options: ApiOptions) {
    this.base = options.base ?? '/api/v1';
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const token = this.options.token();
    return token ? { Authorization: `Bearer ${token}`, ...extra } : extra;
  }

  // body: JSON to send; a Blob (a file) is sent as it is.
  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    const doFetch = this.options.fetch ?? fetch;
    const raw = body instanceof Blob;
    let response: Response;
    try {
      response = await doFetch(this.base + path, {
        method,
        headers: this.headers(body === undefined ? {} : { 'Content-Type': raw ? 'application/octet-stream' : 'application/json' }),
        body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, `edtd did not answer (${(e as Error).message}); is it running?`);
    }
    if (response.ok) return response;
    let parsed: unknown = null;
    const text = await response.text();
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { error: text.trim() };
    }
    const error = errorFromBody(response.status, parsed, `${method} ${path}: HTTP ${response.status}`);
    if (response.status === 401) this.options.onUnauthorized?.();
    throw error;
  }

  private async json(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await this.send(method, path, body);
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  }

  async listClusters(): Promise<Cluster[]> {
    return list(await this.json('GET', '/clusters'), 'clusters').map(toCluster);
  }

  async getCluster(name: string): Promise<Cluster> {
    return toCluster(await this.json('GET', `/clusters/${encodeURIComponent(name)}`));
  }

  async createCluster(spec: ClusterSpec): Promise<Cluster> {
    return toCluster(await this.json('POST', '/clusters', spec));
  }

  async scaleCluster(name: string, containers: number): Promise<Cluster> {
    return toCluster(await this.json('PATCH', `/clusters/${encodeURIComponent(name)}`, { containers }));
  }

  async deleteCluster(name: string): Promise<void> {
    await this.send('DELETE', `/clusters/${encodeURIComponent(name)}`);
  }

  async hostfile(name: string): Promise<string> {
    const response = await this.send('GET', `/clusters/${encodeURIComponent(name)}/hostfile`);
    return response.text();
  }

  async listImages(): Promise<Image[]> {
    return list(await this.json('GET', '/images'), 'images').map(toImage);
  }

  async createImage(request: wire.ImageRequest): Promise<Image> {
    return toImage(await this.json('POST', '/images', request));
  }

  // Answers once the pull has ended, which can take minutes; listPulls()
  // tells how far it has come meanwhile (the admin only).
  async pullImage(request: wire.ImagePullRequest): Promise<ImagePulled> {
    return toPulled(await this.json('POST', '/images/pull', request));
  }

  // The pulls under way, oldest first (every user).
  async listPulls(): Promise<ImagePullProgress[]> {
    return list(await this.json('GET', '/images/pulls'), 'pulls').map(toPullProgress);
  }

  async listGpuDevices(): Promise<Gpu[]> {
    return list(await this.json('GET', '/gpus'), 'gpus').map(toGpu);
  }

  // edtd lists devices ({index, model, simulated, holder}); the form wants
  // models with how many are free.
  async listGpus(): Promise<GpuModel[]> {
    return gpuModels(list(await this.json('GET', '/gpus'), 'gpus'));
  }

  async whoami(): Promise<{ name: string; admin: boolean }> {
    const o = obj(await this.json('GET', '/whoami'));
    return { name: str(o['name']), admin: o['admin'] === true };
  }

  async listVolumes(): Promise<Volume[]> {
    return list(await this.json('GET', '/volumes'), 'volumes').map(toVolume);
  }

  async createVolume(request: wire.VolumeRequest): Promise<Volume> {
    return toVolume(await this.json('POST', '/volumes', request));
  }

  async deleteVolume(name: string): Promise<void> {
    await this.send('DELETE', `/volumes/${encodeURIComponent(name)}`);
  }

  // Writes the file to `path` in the volume (replacing one there); returns
  // the bytes written. onProgress hears how much is sent: fetch cannot tell,
  // so the browser's XMLHttpRequest sends it (an injected fetch, in tests,
  // is told only the end).
  async uploadFile(volume: string, path: string, file: Blob, onProgress?: Progress): Promise<number> {
    const route = filesRoute(volume, 'files', path);
    const body = this.options.fetch ? await this.json('PUT', route, file) : await this.sendWithProgress(route, file, onProgress);
    onProgress?.(file.size, file.size);
    return num(obj(body)['bytes']);
  }

  private sendWithProgress(path: string, file: Blob, onProgress?: Progress): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', this.base + path);
      for (const [k, v] of Object.entries(this.headers({ 'Content-Type': 'application/octet-stream' }))) xhr.setRequestHeader(k, v);
      xhr.upload.onprogress = (e) => onProgress?.(e.loaded, e.total || file.size);
      xhr.onerror = () => reject(new ApiError(0, 'edtd did not answer; is it running?'));
      xhr.onload = () => {
        let parsed: unknown = null;
        try {
          parsed = JSON.parse(xhr.responseText);
        } catch {
          parsed = { error: xhr.responseText.trim() };
        }
        if (xhr.status >= 200 && xhr.status < 300) return resolve(parsed);
        if (xhr.status === 401) this.options.onUnauthorized?.();
        reject(errorFromBody(xhr.status, parsed, `PUT ${path}: HTTP ${xhr.status}`));
      };
      xhr.send(file);
    });
  }

  // The entries of directory `path` ('' the top) of the volume.
  async listFiles(volume: string, path: string): Promise<VolumeListing> {
    const o = obj(await this.json('GET', filesRoute(volume, 'files', path)));
    return { entries: arr(o['entries']).map(toVolumeEntry), truncated: o['truncated'] === true };
  }

  async downloadFile(volume: string, path: string): Promise<Blob> {
    return (await this.send('GET', filesRoute(volume, 'files/content', path))).blob();
  }

  // Deletes a file, or a directory with all it holds; returns how many entries went.
  async deleteFile(volume: string, path: string): Promise<number> {
    return num(obj(await this.json('DELETE', filesRoute(volume, 'files', path)))['entries']);
  }

  async listUsers(): Promise<User[]> {
    return list(await this.json('GET', '/users'), 'users').map((v) => ({ name: str(obj(v)['name']), admin: obj(v)['admin'] === true }));
  }

  // Makes the user and a first token, which is returned this once.
  async createUser(name: string): Promise<NewToken> {
    return toNewToken(await this.json('POST', '/users', { name } satisfies wire.UserRequest));
  }

  async deleteUser(name: string): Promise<void> {
    await this.send('DELETE', `/users/${encodeURIComponent(name)}`);
  }

  async listTokens(user: string): Promise<TokenInfo[]> {
    return list(await this.json('GET', `/users/${encodeURIComponent(user)}/tokens`), 'tokens').map(toTokenInfo);
  }

  async createToken(user: string, request: wire.TokenRequest): Promise<NewToken> {
    return toNewToken(await this.json('POST', `/users/${encodeURIComponent(user)}/tokens`, request));
  }

  async revokeToken(user: string, id: number): Promise<void> {
    await this.send('DELETE', `/users/${encodeURIComponent(user)}/tokens/${id}`);
  }

  // Runs in the launcher unless container names another of the cluster's,
  // from cwd (default: where the cluster mounts its first volume).
  async runJob(cluster: string, command: string, container?: string, cwd?: string): Promise<Job> {
    const request: wire.JobRequest = { command, ...(container ? { container } : {}), ...(cwd ? { cwd } : {}) };
    return toJob(await this.json('POST', `/clusters/${encodeURIComponent(cluster)}/jobs`, request));
  }

  async listJobs(cluster: string, filter: JobFilter = {}): Promise<Job[]> {
    return list(await this.json('GET', `/clusters/${encodeURIComponent(cluster)}/jobs${query(filter)}`), 'jobs').map(toJob);
  }

  async getJob(id: string): Promise<Job> {
    return toJob(await this.json('GET', `/jobs/${encodeURIComponent(id)}`));
  }

  // Follows a job's log: calls onText with each piece as it arrives, until the
  // server ends the stream (the job finished) or the signal aborts.
  async followLog(id: string, onText: (text: string) => void, signal: AbortSignal): Promise<void> {
    const doFetch = this.options.fetch ?? fetch;
    const response = await doFetch(`${this.base}/jobs/${encodeURIComponent(id)}/log?follow=1`, {
      headers: this.headers(),
      signal,
    });
    if (!response.ok || !response.body) {
      throw errorFromBody(response.status, null, `log of job ${id}: HTTP ${response.status}`);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onText(decoder.decode(value, { stream: true }));
    }
    const rest = decoder.decode();
    if (rest) onText(rest);
  }

  // Opens a terminal session in one container; returns the URL of its
  // WebSocket. edtd serves terminals on a port of their own, on the same host
  // as the API, and the one-time path stands for the token.
  async openTerminal(cluster: string, container: string, location: Location = window.location): Promise<string> {
    const body = obj(await this.json('POST', `/clusters/${encodeURIComponent(cluster)}/containers/${encodeURIComponent(container)}/terminal`));
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${scheme}//${location.hostname}:${num(body['port'])}${str(body['path'])}`;
  }

  // Starts the cluster's notebook server in its launcher if need be; returns
  // a one-time link (a path on edtd) that opens Jupyter with a session cookie.
  async openJupyter(cluster: string): Promise<string> {
    const body = obj(await this.json('POST', `/clusters/${encodeURIComponent(cluster)}/jupyter`, {}));
    return str(body['url']);
  }

  // Oldest first, in the order edtd recorded them.
  async listEvents(cluster: string, filter: EventFilter = {}): Promise<ClusterEvent[]> {
    return list(await this.json('GET', `/clusters/${encodeURIComponent(cluster)}/events${query(filter)}`), 'events').map(toEvent);
  }

  // Teams and quotas (docs/platform.md, "Queues, teams and quotas"): the
  // admin sees and changes all; a user sees their own team.
  async listTeams(): Promise<Team[]> {
    return list(await this.json('GET', '/teams'), 'teams').map(toTeam);
  }

  async createTeam(name: string): Promise<Team> {
    return toTeam(await this.json('POST', '/teams', { name } satisfies wire.TeamRequest));
  }

  async deleteTeam(name: string): Promise<void> {
    await this.send('DELETE', `/teams/${encodeURIComponent(name)}`);
  }

  async setQuota(team: string, model: string, quota: wire.QuotaRequest): Promise<void> {
    await this.send('PUT', `/teams/${encodeURIComponent(team)}/quotas/${encodeURIComponent(model)}`, quota);
  }

  async deleteQuota(team: string, model: string): Promise<void> {
    await this.send('DELETE', `/teams/${encodeURIComponent(team)}/quotas/${encodeURIComponent(model)}`);
  }

  // team "": out of any team.
  async setUserTeam(user: string, team: string): Promise<void> {
    await this.send('PUT', `/users/${encodeURIComponent(user)}/team`, { team } satisfies wire.UserTeam);
  }
}
