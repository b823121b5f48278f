import { describe, expect, it } from 'vitest';
import { filesHash, formatBytes, sortEntries } from './files';
import { parentOf, uploadTargets } from './upload';

describe("a volume's files", () => {
  it('writes sizes for people', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(7840016)).toBe('7.5 MiB');
  });

  it('lists folders first, then files, by name', () => {
    const e = (name: string, type: 'file' | 'directory') => ({ name, type, bytes: 0, modified: 0 });
    expect(sortEntries([e('b.txt', 'file'), e('z', 'directory'), e('a.txt', 'file'), e('m', 'directory')]).map((x) => x.name)).toEqual(['m', 'z', 'a.txt', 'b.txt']);
  });

  it('puts a folder in one segment of the URL', () => {
    expect(filesHash('data', '')).toBe('#/volumes/data/files');
    expect(filesHash('data', 'a b/c')).toBe('#/volumes/data/files/a%20b%2Fc');
  });

  it('sends each file into the folder, a picked folder keeping its own', () => {
    const inFolder = Object.defineProperty(new File(['x'], 'two.txt'), 'webkitRelativePath', { value: 'set/sub/two.txt' });
    expect(uploadTargets([new File(['x'], 'one.txt'), inFolder], '/inputs/').map((t) => t.path)).toEqual(['inputs/one.txt', 'inputs/set/sub/two.txt']);
    expect(uploadTargets([new File(['x'], 'one.txt')], '').map((t) => t.path)).toEqual(['one.txt']);
    expect(parentOf('inputs/set/two.txt')).toBe('inputs/set');
    expect(parentOf('one.txt')).toBe('');
  });
});
