import { afterEach, describe, expect, it, vi } from 'vitest';
import { Api, query } from '../api';
import { eventFilters, jobFilters, sinceTime } from './filters';

function pick(el: HTMLElement, id: string, value: string) {
  const select = el.querySelector<HTMLSelectElement>(`#${id}`)!;
  select.value = value;
  select.dispatchEvent(new Event('change'));
}

describe('filters', () => {
  afterEach(() => vi.useRealTimers());

  it('offers the contract types and states, labelled, and calls back on a change', () => {
    // The clock held still: the wall clock may step back between two reads.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-01T10:00:00.000Z') });
    const changed = vi.fn();
    const events = eventFilters(changed);
    document.body.replaceChildren(events.el);
    expect(events.el.querySelector('label[for="events-type"]')?.textContent).toBe('Type');
    expect([...events.el.querySelectorAll('#events-type option')].map((o) => o.textContent)).toContain('DrainTimedOut');
    expect(events.value()).toEqual({ type: '', since: '' });
    pick(events.el, 'events-type', 'Scaling');
    pick(events.el, 'events-since', '60');
    expect(changed).toHaveBeenCalledTimes(2);
    expect(events.value().type).toBe('Scaling');
    expect(events.value().since).toBe('2026-12-01T09:00:00.000Z');
    events.setError("'x' is not an event type");
    expect(events.el.querySelector('#events-filter-error')?.textContent).toBe("'x' is not an event type");
    expect(events.el.querySelector('#events-type')?.getAttribute('aria-invalid')).toBe('true');
  });

  it("follows the cluster's containers and keeps the one picked", () => {
    const jobs = jobFilters(vi.fn());
    jobs.setContainers(['c-launcher', 'c-worker-0']);
    pick(jobs.el, 'jobs-container', 'c-worker-0');
    pick(jobs.el, 'jobs-state', 'Failed');
    jobs.setContainers(['c-launcher']);
    expect(jobs.value()).toEqual({ state: 'Failed', container: 'c-worker-0' });
    expect(jobs.el.querySelector('label[for="jobs-state"]')?.textContent).toBe('State');
  });

  it('sends only what is set, encoded', async () => {
    expect(query({})).toBe('');
    expect(query({ type: '', since: '2026-12-01T10:00:00.000Z' })).toBe('?since=2026-12-01T10%3A00%3A00.000Z');
    expect(sinceTime(10, Date.parse('2026-12-01T10:10:00.000Z'))).toBe('2026-12-01T10:00:00.000Z');
    const fetch = vi.fn(async () => new Response(JSON.stringify({ jobs: [] }), { status: 200 }));
    await new Api({ token: () => 't', fetch: fetch as unknown as typeof globalThis.fetch }).listJobs('a', { state: 'Running', container: '' });
    expect((fetch.mock.calls[0] as unknown as [string])[0]).toBe('/api/v1/clusters/a/jobs?state=Running');
  });
});
