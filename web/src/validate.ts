// Client-side checks of the create-cluster form. They are edtd's own checks,
// with the limits of the API contract (api/openapi.json, compiled into
// generated/api.ts), so a user sees a mistake before submitting, next to the
// field; the server stays the authority and its errors are shown the same
// way.
//
// Field keys are the API's field names ("name", "containers", "gpu.count",
// "mounts[1].path", ...) so a server error and a client error land in the
// same place.

import type { ClusterSpec, Framework, GpuModel, Image, Volume } from './api';
import { contract } from './generated/api';

export const kFrameworks: { id: Framework; label: string }[] = contract.Framework.values.map((id) => ({
  id,
  label: contract.Framework.labels[id],
}));

export const kMinContainers = contract.ContainerCount.minimum;
export const kMaxContainers = contract.ContainerCount.maximum;
// "<name>-worker-NN" must stay a DNS label (63 characters).
const kMaxName = contract.ClusterName.maxLength;
const kNamePattern = new RegExp(contract.ClusterName.pattern);
const kMaxGpusPerContainer = contract.GpuCount.maximum;
const kMaxParallel = contract.ParallelSize.maximum;
export const kMinPriority = contract.Priority.minimum;
export const kMaxPriority = contract.Priority.maximum;
const kMinShm = contract.ShmSize.bytes.minimum;
const kMaxShm = contract.ShmSize.bytes.maximum;
const kDefaultShm = contract.ShmSize.bytes.default;
const kMinMemory = contract.MemoryLimit.bytes.minimum;
const kMaxMemory = contract.MemoryLimit.bytes.maximum;
const kMemoryHeadroom = contract.MemoryLimit.bytes.headroom;
// A CPU bound, in thousandths of a CPU.
const kMinCpuMillis = contract.CpuLimit.millicpus.minimum;
const kMaxCpuMillis = contract.CpuLimit.millicpus.maximum;
// Size suffixes (lower case) and their bytes.
const kSizeUnits: Record<string, number> = contract.ShmSize.sizeUnits;
const kMaxDrainMs = contract.DrainTimeout.durationMs.maximum;
export const kDefaultDrain = `${contract.DrainTimeout.durationMs.default / 1000}s`;
// Duration suffixes and their milliseconds ("" is seconds).
const kDurationUnits: Record<string, number> = contract.DrainTimeout.durationUnits;

// Directories a volume may not cover or be mounted inside: the sandbox takes
// them from the host (read-only) or manages them itself.
export const kSystemDirs: readonly string[] = contract.MountPath.systemDirectories;

// A size as the API's messages write it: 1M, 64M, 256Gi, 16Ti.
export function formatSize(bytes: number): string {
  if (bytes % 1024 ** 4 === 0 && bytes >= 1024 ** 4) return `${bytes / 1024 ** 4}Ti`;
  if (bytes % 1024 ** 3 === 0 && bytes >= 1024 ** 3) return `${bytes / 1024 ** 3}Gi`;
  if (bytes % 1024 ** 2 === 0) return `${bytes / 1024 ** 2}M`;
  return `${bytes}`;
}

// True if path is dir or inside it.
function isUnder(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

export interface MountForm {
  volume: string;
  path: string;
  read_only: boolean;
}

export interface ClusterForm {
  framework: string;
  name: string;
  containers: string;
  image: string;
  gpu_enabled: boolean;
  gpu_model: string;
  gpu_count: string;
  shm_enabled: boolean;
  shm: string;
  memory: string; // per container; empty: no bound
  cpus: string; // per container, e.g. 1.5; empty: no bound
  drain_timeout: string;
  mounts: MountForm[];
  // Megatron-LM only; empty: not given (1).
  tensor_parallel: string;
  pipeline_parallel: string;
  // The scheduler's part (docs/platform.md, "Elastic clusters"): elastic
  // bounds (min empty: containers) and the queue's priority (empty: 0).
  elastic: boolean;
  min_containers: string;
  max_containers: string;
  priority: string;
}

export interface Inventory {
  images: Image[];
  gpus: GpuModel[];
  volumes: Volume[];
  taken_names: string[];
}

export type FieldErrors = Record<string, string>;

export function emptyForm(): ClusterForm {
  return {
    framework: 'horovod',
    name: '',
    containers: '2',
    image: '',
    gpu_enabled: false,
    gpu_model: '',
    gpu_count: '1',
    shm_enabled: false,
    shm: '1Gi',
    memory: '',
    cpus: '',
    drain_timeout: kDefaultDrain,
    mounts: [],
    tensor_parallel: '',
    pipeline_parallel: '',
    elastic: false,
    min_containers: '',
    max_containers: '',
    priority: '',
  };
}

// Images that carry the framework: the only ones the form offers.
export function imagesFor(framework: string, images: Image[]): Image[] {
  return images.filter((i) => i.frameworks.includes(framework));
}

// A whole number written in decimal, or null.
export function parseCount(text: string): number | null {
  const t = text.trim();
  return /^\d+$/.test(t) ? Number(t) : null;
}

// The same grammar as edtd's parse_size: a number and an optional unit of
// the contract's (case does not matter). Returns bytes, or null.
export function parseSize(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([a-z]*)$/i.exec(text.trim());
  if (!m) return null;
  const scale = kSizeUnits[m[2].toLowerCase()];
  return scale === undefined ? null : Math.round(Number(m[1]) * scale);
}

// The same grammar as edtd's parse_duration: a number and an optional unit
// of the contract's. Returns milliseconds, or null.
export function parseDuration(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([a-z]*)$/.exec(text.trim());
  if (!m) return null;
  const scale = kDurationUnits[m[2]];
  return scale === undefined ? null : Math.round(Number(m[1]) * scale);
}

export function checkDrainTimeout(text: string): string | null {
  if (text.trim().startsWith('-')) return `"${text.trim()}" is negative; write 0s or more, e.g. ${kDefaultDrain}.`;
  const ms = parseDuration(text);
  if (ms === null) return `"${text.trim()}" is not a duration; write a number with a unit, e.g. 60s, 500ms or 2m.`;
  if (ms > kMaxDrainMs) return `${text.trim()} is longer than ${kMaxDrainMs / 1000}s; ask for less, e.g. ${kDefaultDrain}.`;
  return null;
}

export function checkName(name: string, taken: string[]): string | null {
  if (name === '') return 'Give the cluster a name, e.g. tthvd.';
  if (name.length > kMaxName) return `The name has ${name.length} characters; at most ${kMaxName} are allowed (it names hosts such as ${name.slice(0, 8)}…-worker-0).`;
  if (!kNamePattern.test(name)) {
    return 'Use lower-case letters, digits and "-", starting and ending with a letter or digit (a DNS label), e.g. tthvd.';
  }
  if (taken.includes(name)) return `A cluster named "${name}" exists already; choose another name or delete that one.`;
  return null;
}

export function checkContainers(text: string): string | null {
  const n = parseCount(text);
  if (n === null) return 'Enter a whole number of containers, e.g. 2.';
  if (n < kMinContainers) return `A cluster needs at least ${kMinContainers} containers: one launcher and at least one worker.`;
  if (n > kMaxContainers) return `At most ${kMaxContainers} containers per cluster; ask for fewer.`;
  return null;
}

// A mount path must be absolute, normalised and outside the system
// directories; returns the reason it is not, or null.
export function checkMountPath(path: string): string | null {
  if (path === '') return 'Enter the path to mount the volume at, e.g. /root/data.';
  if (!path.startsWith('/')) return `"${path}" is relative; write an absolute path such as /root/data.`;
  const parts = path.split('/').slice(1);
  if (parts.some((p) => p === '..')) return `"${path}" contains ".."; write the path without it.`;
  if (path.length > 1 && (path.endsWith('/') || parts.some((p) => p === '' || p === '.'))) {
    return `"${path}" is not normalised; write it without "//", "/./" or a trailing "/".`;
  }
  if (path === '/' || path === '/root') return `"${path}" would cover the container's ${path === '/' ? 'root' : 'home'}; mount below it, e.g. /root/data.`;
  const system = kSystemDirs.find((d) => isUnder(path, d) || isUnder(d, path));
  if (system) return `"${path}" covers the system directory ${system}; mount the volume elsewhere, e.g. /root/data or /data.`;
  return null;
}

export function validate(form: ClusterForm, inv: Inventory): FieldErrors {
  const errors: FieldErrors = {};
  const set = (field: string, message: string | null) => {
    if (message) errors[field] = message;
  };

  if (!kFrameworks.some((f) => f.id === form.framework)) {
    set('framework', `Choose a framework: ${kFrameworks.map((f) => f.label).join(', ').replace(/, ([^,]*)$/, ' or $1')}.`);
  }
  set('name', checkName(form.name.trim(), inv.taken_names));
  set('containers', checkContainers(form.containers));
  const containers = parseCount(form.containers) ?? 0;

  const offered = imagesFor(form.framework, inv.images);
  if (form.image === '') {
    set('image', offered.length ? 'Choose an image.' : `No image carries ${form.framework}; ask an administrator to add one.`);
  } else {
    const image = inv.images.find((i) => i.name === form.image);
    if (!image) set('image', `Unknown image "${form.image}"; choose one from the list.`);
    else if (!image.frameworks.includes(form.framework)) {
      set('image', `Image ${image.name} carries ${image.frameworks.join(', ') || 'no framework'}, not ${form.framework}; choose another image.`);
    }
  }

  if (form.gpu_enabled) {
    const model = inv.gpus.find((g) => g.model === form.gpu_model);
    const count = parseCount(form.gpu_count);
    if (!model) set('gpu.model', inv.gpus.length ? 'Choose a GPU model.' : 'This platform has no GPUs; turn GPU off.');
    if (count === null || count < 1 || count > kMaxGpusPerContainer) set('gpu.count', `Enter a whole number of GPUs per container, from 1 to ${kMaxGpusPerContainer}.`);
    // More than are free waits in the queue (docs/scheduling.md); more than the platform has never fits.
    else if (model && containers >= 1 && count * containers > model.total) {
      set('gpu.count', `${containers} containers × ${count} GPU${count > 1 ? 's' : ''} = ${count * containers} ${model.model}, but this platform has only ${model.total}; ask for fewer.`);
    }
  }

  if (form.shm_enabled) {
    const bytes = parseSize(form.shm);
    if (bytes === null) set('shm', `"${form.shm}" is not a size; write a number with a unit, e.g. 512M or 1Gi.`);
    else if (bytes < kMinShm || bytes > kMaxShm) set('shm', `${form.shm.trim()} is outside ${formatSize(kMinShm)} to ${formatSize(kMaxShm)}; ask for a size in that range, e.g. 1Gi.`);
  }

  if (form.framework === 'megatron') checkParallel(form, containers, set);
  set('memory', checkMemory(form));
  set('cpus', checkCpus(form.cpus));
  set('drain_timeout', checkDrainTimeout(form.drain_timeout));
  checkScheduling(form, parseCount(form.containers), set);

  form.mounts.forEach((m, i) => {
    if (m.volume === '') set(`mounts[${i}].volume`, 'Choose a volume.');
    else if (!inv.volumes.some((v) => v.name === m.volume)) set(`mounts[${i}].volume`, `Unknown volume "${m.volume}"; create it first (edt volume create ${m.volume}).`);
    const pathError = checkMountPath(m.path);
    set(`mounts[${i}].path`, pathError);
    const other = pathError ? -1 : form.mounts.findIndex((o, j) => j < i && !checkMountPath(o.path) && (isUnder(m.path, o.path) || isUnder(o.path, m.path)));
    if (other >= 0) set(`mounts[${i}].path`, `${m.path} overlaps volume ${other + 1} at ${form.mounts[other].path}; choose a separate path.`);
  });
  return errors;
}

// edtd's check of a Megatron-LM cluster: each size a whole number in the
// contract's range, and the cluster's GPUs (1 per container without GPUs)
// divisible by tensor x pipeline.
function checkParallel(form: ClusterForm, containers: number, set: (field: string, message: string | null) => void): void {
  const sizes: [string, string][] = [
    ['megatron.tensor_parallel', form.tensor_parallel],
    ['megatron.pipeline_parallel', form.pipeline_parallel],
  ];
  let product = 1;
  for (const [field, text] of sizes) {
    if (text.trim() === '') continue;
    const n = parseCount(text);
    if (n === null || n < 1 || n > kMaxParallel) {
      set(field, `Enter a whole number from 1 to ${kMaxParallel}, or leave it empty for 1.`);
      return;
    }
    product *= n;
  }
  const perContainer = form.gpu_enabled ? parseCount(form.gpu_count) ?? 1 : 1;
  const gpus = containers * perContainer;
  if (containers < kMinContainers || gpus % product === 0) return;
  const fits: number[] = [];
  for (let n = kMinContainers; n <= kMaxContainers && fits.length < 3; n++) if ((n * perContainer) % product === 0) fits.push(n);
  set(
    'megatron',
    `${containers} containers × ${perContainer} GPU${perContainer > 1 ? 's' : ''} = ${gpus} GPUs, which tensor × pipeline = ${product} does not divide; ` +
      (fits.length ? `ask for ${fits.join(', ')} … containers, or other sizes.` : 'choose smaller sizes.'),
  );
}

// edtd's check of the scheduler's fields: priority in the contract's range;
// when elastic, min and max container counts with min <= containers <= max
// (min defaults to containers).
function checkScheduling(form: ClusterForm, containers: number | null, set: (field: string, message: string | null) => void): void {
  if (form.priority.trim() !== '') {
    const p = parseCount(form.priority);
    if (p === null || p < kMinPriority || p > kMaxPriority) set('priority', `Enter a whole number from ${kMinPriority} to ${kMaxPriority} (higher is served first), or leave it empty for ${kMinPriority}.`);
  }
  if (!form.elastic) return;
  const bound = (field: string, text: string, what: string): number | null => {
    const n = parseCount(text);
    if (n !== null && n >= kMinContainers && n <= kMaxContainers) return n;
    set(field, `Enter the ${what} as a whole number of containers from ${kMinContainers} to ${kMaxContainers}.`);
    return null;
  };
  const min = form.min_containers.trim() === '' ? containers : bound('min_containers', form.min_containers, 'smallest size');
  const max = form.max_containers.trim() === '' ? null : bound('max_containers', form.max_containers, 'largest size');
  if (form.max_containers.trim() === '') set('max_containers', 'Enter the largest size the scheduler may grow the cluster to, e.g. 8.');
  if (min === null || max === null || containers === null) return;
  if (form.min_containers.trim() !== '' && min > max) set('min_containers', `The smallest size ${min} is more than the largest ${max}; give a minimum no larger than the maximum.`);
  else if (containers < min || containers > max) set('containers', `${containers} containers is outside the elastic bounds ${min}..${max}; start at a size in that range.`);
}

// What is wrong with the form's memory bound, or null: it must hold the
// shm (the asked one, or edtd's default) and 64 MiB more.
function checkMemory(form: ClusterForm): string | null {
  if (form.memory.trim() === '') return null;
  const bytes = parseSize(form.memory);
  if (bytes === null) return `"${form.memory}" is not a size; write a number with a unit, e.g. 8Gi, or leave it empty for no bound.`;
  if (bytes < kMinMemory || bytes > kMaxMemory) return `${form.memory.trim()} is outside ${formatSize(kMinMemory)} to ${formatSize(kMaxMemory)}; ask for a size in that range, e.g. 8Gi.`;
  const shm = (form.shm_enabled ? parseSize(form.shm) : null) ?? kDefaultShm;
  if (bytes < shm + kMemoryHeadroom) return `${form.memory.trim()} cannot hold the shared memory of ${formatSize(shm)} and the container's processes; ask for at least ${formatSize(shm + kMemoryHeadroom)}.`;
  return null;
}

// What is wrong with a CPU bound, or null: as edtd reads it, a decimal
// with at most 3 decimals from 0.01 to 1024 CPUs (empty: no bound).
function checkCpus(text: string): string | null {
  const cpus = text.trim();
  if (cpus === '') return null;
  const range = `${kMinCpuMillis / 1000} to ${kMaxCpuMillis / 1000}`;
  if (!/^[0-9]+([.][0-9]{1,3})?$/.test(cpus)) return `"${text}" is not a number of CPUs with at most 3 decimals; write e.g. 1.5 (${range}), or leave it empty for no bound.`;
  const [whole, fraction = ''] = cpus.split('.');
  const millis = Number(whole) * 1000 + Number(fraction.padEnd(3, '0'));
  if (millis < kMinCpuMillis || millis > kMaxCpuMillis) return `${cpus} is outside ${range} CPUs; ask for a number in that range, e.g. 1.5.`;
  return null;
}

// The request body of a valid form.
export function toSpec(form: ClusterForm): ClusterSpec {
  const spec: ClusterSpec = {
    name: form.name.trim(),
    framework: form.framework as Framework,
    containers: parseCount(form.containers) ?? 0,
    image: form.image,
  };
  if (form.gpu_enabled) spec.gpu = { model: form.gpu_model, count: parseCount(form.gpu_count) ?? 0 };
  if (form.shm_enabled) spec.shm = form.shm.trim();
  if (form.memory.trim() !== '') spec.memory = form.memory.trim();
  if (form.cpus.trim() !== '') spec.cpus = form.cpus.trim();
  if (form.drain_timeout.trim() !== kDefaultDrain) spec.drain_timeout = form.drain_timeout.trim();
  if (form.framework === 'megatron') {
    const megatron: { tensor_parallel?: number; pipeline_parallel?: number } = {};
    if (form.tensor_parallel.trim() !== '') megatron.tensor_parallel = parseCount(form.tensor_parallel) ?? 0;
    if (form.pipeline_parallel.trim() !== '') megatron.pipeline_parallel = parseCount(form.pipeline_parallel) ?? 0;
    if (Object.keys(megatron).length) spec.megatron = megatron;
  }
  if (form.priority.trim() !== '') spec.priority = parseCount(form.priority) ?? 0;
  if (form.elastic) {
    if (form.min_containers.trim() !== '') spec.min_containers = parseCount(form.min_containers) ?? 0;
    spec.max_containers = parseCount(form.max_containers) ?? 0;
  }
  if (form.mounts.length) spec.mounts = form.mounts.map((m) => ({ volume: m.volume, path: m.path, read_only: m.read_only }));
  return spec;
}
