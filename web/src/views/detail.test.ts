import { describe, expect, it } from 'vitest';
import { phaseChanges } from './detail';

describe('phaseChanges', () => {
  const two = [
    { name: 'kb-launcher', phase: 'Running' },
    { name: 'kb-worker-0', phase: 'Running' },
  ];

  it('says nothing on the first render, nor when nothing changed', () => {
    expect(phaseChanges(null, two)).toBe('');
    expect(phaseChanges(new Map(two.map((c) => [c.name, c.phase])), two)).toBe('');
  });

  it('names each container that is new or changed its phase, and each one gone', () => {
    const before = new Map([...two.map((c) => [c.name, c.phase] as [string, string]), ['kb-worker-2', 'Draining']]);
    const now = [...two, { name: 'kb-worker-1', phase: 'Creating' }];
    now[1] = { name: 'kb-worker-0', phase: 'Failed' };
    expect(phaseChanges(before, now)).toBe('kb-worker-0 is Failed. kb-worker-1 is Creating. kb-worker-2 left.');
  });
});
