import { describe, expect, it } from 'vitest';
import { MetricsParser, parseLine } from './logparse';

describe('parseLine', () => {
  it('reads numeric key=value pairs', () => {
    expect(parseLine('epoch=1 loss=0.4213 acc=0.912 samples/s=5230.4')).toEqual({
      rank: null,
      values: { epoch: 1, loss: 0.4213, acc: 0.912, 'samples/s': 5230.4 },
    });
  });

  it('takes rank tags in the forms launchers print', () => {
    expect(parseLine('[1] epoch=2 loss=0.3').rank).toBe(1);
    expect(parseLine('[0,1]<stdout>: loss=1e-3').values).toEqual({ loss: 0.001 });
    expect(parseLine('[3,0]<stderr>:loss=2').rank).toBe(3);
    expect(parseLine('rank 2: acc=0.5').rank).toBe(2);
  });

  it('ignores words, paths and values that are not numbers', () => {
    expect(parseLine('Train Epoch: 1 [0/5000 (0%)]').values).toEqual({});
    expect(parseLine('using --data=/tmp/mnist host=tthvd-launcher').values).toEqual({});
    expect(parseLine('lr=1e-3, acc=91.5%, loss=-0.2;').values).toEqual({ lr: 0.001, acc: 91.5, loss: -0.2 });
    expect(parseLine('version=1.2.3').values).toEqual({});
  });
});

describe('MetricsParser', () => {
  it('joins lines split across chunks and keeps the tail for later', () => {
    const p = new MetricsParser();
    expect(p.push('epoch=1 loss=0.9 acc=0.')).toBe(false);
    expect(p.push('7\nepoch=2 loss=0.5')).toBe(true);
    expect(p.points.map((x) => [x.x, x.values['acc']])).toEqual([[1, 0.7]]);
    expect(p.finish()).toBe(true);
    expect(p.points.map((x) => x.values['loss'])).toEqual([0.9, 0.5]);
  });

  it('charts the lowest rank only', () => {
    const p = new MetricsParser();
    p.push('[1] epoch=1 loss=0.8\n[0] epoch=1 loss=0.9\n[1] epoch=2 loss=0.6\n[0] epoch=2 loss=0.7\n');
    expect(p.points.map((x) => [x.rank, x.x, x.values['loss']])).toEqual([
      [0, 1, 0.9],
      [0, 2, 0.7],
    ]);
  });

  it('maps aliases onto the charted fields and lists those present', () => {
    const p = new MetricsParser();
    p.push('step=10 train_loss=1.5 samples_per_sec=300\nstep=20 train_loss=1.1 samples_per_sec=310\n');
    expect(p.fields().map((f) => f.key)).toEqual(['loss', 'samples/s']);
    expect(p.points.map((x) => x.x)).toEqual([10, 20]);
  });

  it('numbers lines without an epoch in order, and skips lines with no charted field', () => {
    const p = new MetricsParser();
    p.push('lr=0.1\nloss=3\r\nloss=2\n');
    expect(p.points.map((x) => [x.x, x.values['loss']])).toEqual([
      [0, 3],
      [1, 2],
    ]);
  });
});
