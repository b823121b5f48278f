// Filter controls of the cluster page's events and jobs: labelled selects
// that edtd's query parameters take (GET /clusters/{name}/events?type=&since=,
// /jobs?state=&container=), the choices from the API contract, and an error
// line beside them for a filter edtd refuses.

import type { EventFilter, JobFilter } from '../api';
import { h, replace } from '../dom';
import { contract } from '../generated/api';

export interface Filters<F> {
  el: HTMLElement;
  // What the controls select now.
  value(): F;
  // Shows edtd's refusal (null clears it).
  setError(message: string | null): void;
}

// The "Since" choices: how far back, in minutes (0: all time).
const kSince: [string, number][] = [
  ['All time', 0],
  ['Last 10 minutes', 10],
  ['Last hour', 60],
  ['Last day', 24 * 60],
];

function select(id: string, label: string, options: [string, string][], onChange: () => void): [HTMLElement[], HTMLSelectElement] {
  const control = h('select', { id, class: 'auto', onchange: onChange }, options.map(([value, text]) => h('option', { value }, text)));
  return [[h('label', { for: id }, label), control], control];
}

function errorLine(id: string, controls: HTMLSelectElement[]): [HTMLElement, (message: string | null) => void] {
  const line = h('p', { class: 'field-error', id, role: 'alert' });
  for (const c of controls) c.setAttribute('aria-describedby', id);
  return [
    line,
    (message) => {
      line.textContent = message ?? '';
      for (const c of controls) {
        if (message) c.setAttribute('aria-invalid', 'true');
        else c.removeAttribute('aria-invalid');
      }
    },
  ];
}

// "2026-12-01T10:00:00.000Z" for `minutes` before `now`.
export function sinceTime(minutes: number, now = Date.now()): string {
  return new Date(now - minutes * 60_000).toISOString();
}

export function eventFilters(onChange: () => void): Filters<EventFilter> {
  const all: [string, string] = ['', 'All types'];
  const [typeParts, type] = select('events-type', 'Type', [all, ...contract.EventType.values.map((t): [string, string] => [t, t])], onChange);
  const [sinceParts, since] = select('events-since', 'Since', kSince.map(([text, minutes]) => [String(minutes), text]), onChange);
  const [line, setError] = errorLine('events-filter-error', [type, since]);
  const form = h('form', { class: 'inline', id: 'events-filter', 'aria-label': 'Filter events', onsubmit: (e: Event) => e.preventDefault() }, ...typeParts, ...sinceParts);
  return {
    el: h('div', {}, form, line),
    value: () => {
      const minutes = Number(since.value);
      return { type: type.value, since: minutes ? sinceTime(minutes) : '' };
    },
    setError,
  };
}

export interface JobFilters extends Filters<JobFilter> {
  // Follows the cluster's containers, keeping the one picked.
  setContainers(names: string[]): void;
}

export function jobFilters(onChange: () => void): JobFilters {
  const all: [string, string] = ['', 'All states'];
  const [stateParts, state] = select('jobs-state', 'State', [all, ...contract.JobState.values.map((s): [string, string] => [s, s])], onChange);
  const [containerParts, container] = select('jobs-container', 'Container', [['', 'All containers']], onChange);
  const [line, setError] = errorLine('jobs-filter-error', [state, container]);
  const form = h('form', { class: 'inline', id: 'jobs-filter', 'aria-label': 'Filter jobs', onsubmit: (e: Event) => e.preventDefault() }, ...stateParts, ...containerParts);
  return {
    el: h('div', {}, form, line),
    value: () => ({ state: state.value, container: container.value }),
    setError,
    setContainers(names) {
      const picked = container.value;
      const wanted = ['', ...names, ...(picked && !names.includes(picked) ? [picked] : [])];
      if (wanted.join() === [...container.options].map((o) => o.value).join()) return;
      replace(container, wanted.map((n) => h('option', { value: n, selected: n === picked }, n || 'All containers')));
    },
  };
}
