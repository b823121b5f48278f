// What the platform views (volumes, users and tokens, images, GPUs) work
// out from the API's answers: which clusters mount a volume, which cluster a
// GPU's holder belongs to, and the checks of their forms, with the limits of
// the API contract (generated/api.ts) so a mistake is shown next to its field
// before edtd is asked; edtd stays the authority.

import type { Cluster, Gpu, Volume } from './api';
import { contract } from './generated/api';

const kResourcePattern = new RegExp(contract.ResourceName.pattern);
const kResourceMax = contract.ResourceName.maxLength;
const kLifetimeUnits: Record<string, number> = contract.TokenLifetime.durationUnits;
const kLifetimeMinMs = contract.TokenLifetime.durationMs.minimum;
const kLifetimeMaxMs = contract.TokenLifetime.durationMs.maximum;
const kDescriptionMax = contract.TokenDescription.maxLength;

// A volume, image or user name: a DNS label. `what` is "volume", "user", ...
export function checkResourceName(name: string, what: string, taken: string[] = []): string | null {
  if (name === '') return `Give the ${what} a name, e.g. ${what === 'user' ? 'alice' : 'data'}.`;
  if (name.length > kResourceMax) return `The name has ${name.length} characters; at most ${kResourceMax} are allowed.`;
  if (!kResourcePattern.test(name)) {
    return `"${name}" is not a DNS label: use lower-case letters, digits and '-', starting and ending with a letter or digit.`;
  }
  if (taken.includes(name)) return `A ${what} named "${name}" exists already; choose another name.`;
  return null;
}

// A token's lifetime as the API takes it: "" (never expires), or a whole
// number with an optional unit (s, m, h, d) from 1s to 365d.
export function checkTokenLifetime(text: string): string | null {
  const t = text.trim();
  if (t === '') return null;
  const m = /^(\d{1,12})([a-z]?)$/.exec(t);
  const scale = m ? kLifetimeUnits[m[2]] : undefined;
  if (!m || scale === undefined) return `"${t}" is not a lifetime; write a whole number with a unit (s, m, h, d), e.g. 90d or 12h, or leave it empty for a token that never expires.`;
  const ms = Number(m[1]) * scale;
  if (ms < kLifetimeMinMs) return `${t} is shorter than ${kLifetimeMinMs / 1000}s; ask for 1s or more.`;
  if (ms > kLifetimeMaxMs) return `${t} is longer than ${kLifetimeMaxMs / 86400000}d; ask for 365d or less.`;
  return null;
}

export function checkTokenDescription(text: string): string | null {
  return text.length > kDescriptionMax ? `The description has ${text.length} characters; at most ${kDescriptionMax} are allowed.` : null;
}

// The clusters (of those the caller sees) that mount each volume, by name.
export function mountedBy(volumes: Volume[], clusters: Cluster[]): Map<string, string[]> {
  const by = new Map<string, string[]>(volumes.map((v) => [v.name, []]));
  for (const c of clusters) {
    for (const m of c.mounts ?? []) {
      const names = by.get(m.volume);
      if (names && !names.includes(c.name)) names.push(c.name);
    }
  }
  return by;
}

// The cluster a container belongs to: the one that lists it, else what its
// name says (<cluster>-launcher, <cluster>-worker-<i>), else "".
export function clusterOf(container: string, clusters: Cluster[]): string {
  const listed = clusters.find((c) => c.container_status.some((s) => s.name === container));
  if (listed) return listed.name;
  const m = /^(.+)-(launcher|worker-\d+)$/.exec(container);
  return m ? m[1] : '';
}

export interface GpuRow {
  index: number;
  model: string;
  simulated: boolean;
  // "free", "held" (by a container the caller may not know) or "yours".
  state: 'free' | 'held' | 'named';
  holder: string;
  cluster: string;
}

export function gpuRows(gpus: Gpu[], clusters: Cluster[]): GpuRow[] {
  return [...gpus]
    .sort((a, b) => a.index - b.index)
    .map((g) => ({
      index: g.index,
      model: g.model,
      simulated: g.simulated,
      state: g.holder ? 'named' : g.held ? 'held' : 'free',
      holder: g.holder,
      cluster: g.holder ? clusterOf(g.holder, clusters) : '',
    }));
}

// Unix seconds as local text; 0 reads as `zero` ("never", "—").
export function unixTime(seconds: number, zero: string): string {
  return seconds > 0 ? new Date(seconds * 1000).toLocaleString() : zero;
}
