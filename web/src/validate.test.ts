import { describe, expect, it } from 'vitest';
import type { Inventory } from './validate';
import { checkMountPath, emptyForm, imagesFor, parseDuration, parseSize, toSpec, validate } from './validate';

const inventory: Inventory = {
  images: [
    { name: 'edt', frameworks: ['horovod'] },
    { name: 'ds', frameworks: ['deepspeed', 'megatron'] },
  ],
  gpus: [{ model: 'NVIDIA-P4', total: 8, free: 6, simulated: true }],
  volumes: [{ name: 'data' }, { name: 'ckpt' }],
  taken_names: ['taken'],
};

function good() {
  return { ...emptyForm(), name: 'tthvd', image: 'edt' };
}

describe('validate', () => {
  it('accepts the reference cluster', () => {
    const form = { ...good(), gpu_enabled: true, gpu_model: 'NVIDIA-P4', gpu_count: '1', shm_enabled: true, shm: '1Gi', mounts: [{ volume: 'data', path: '/root/data', read_only: false }] };
    expect(validate(form, inventory)).toEqual({});
    expect(toSpec(form)).toEqual({
      name: 'tthvd',
      framework: 'horovod',
      containers: 2,
      image: 'edt',
      gpu: { model: 'NVIDIA-P4', count: 1 },
      shm: '1Gi',
      mounts: [{ volume: 'data', path: '/root/data', read_only: false }],
    });
  });

  it.each([
    ['', 'Give the cluster a name'],
    ['TTHVD', 'DNS label'],
    ['-a', 'DNS label'],
    ['a-', 'DNS label'],
    ['a_b', 'DNS label'],
    ['a'.repeat(41), 'at most 40'],
    ['taken', 'exists already'],
  ])('refuses the name %j', (name, message) => {
    expect(validate({ ...good(), name }, inventory).name).toContain(message);
  });

  it.each([
    ['1', 'at least 2'],
    ['0', 'at least 2'],
    ['', 'whole number'],
    ['2.5', 'whole number'],
    ['-3', 'whole number'],
    ['65', 'At most 64'],
    ['two', 'whole number'],
  ])('refuses %j containers', (containers, message) => {
    expect(validate({ ...good(), containers }, inventory).containers).toContain(message);
  });

  it('refuses an image without the framework and offers only images that carry it', () => {
    expect(validate({ ...good(), framework: 'deepspeed', image: 'edt' }, inventory).image).toBe('Image edt carries horovod, not deepspeed; choose another image.');
    expect(imagesFor('megatron', inventory.images).map((i) => i.name)).toEqual(['ds']);
    expect(validate({ ...good(), framework: 'slurm', image: '' }, inventory).image).toContain('No image carries slurm');
    expect(validate({ ...good(), framework: 'pytorch' }, inventory).framework).toContain('Choose a framework');
  });

  it('counts GPUs over all containers against the platform\u2019s, not the free ones (those queue)', () => {
    const form = { ...good(), containers: '4', gpu_enabled: true, gpu_model: 'NVIDIA-P4', gpu_count: '2' };
    expect(validate(form, inventory)['gpu.count']).toBeUndefined();
    expect(validate({ ...form, containers: '5' }, inventory)['gpu.count']).toBe('5 containers × 2 GPUs = 10 NVIDIA-P4, but this platform has only 8; ask for fewer.');
    expect(validate({ ...form, gpu_count: '0' }, inventory)['gpu.count']).toContain('from 1 to 16');
    expect(validate({ ...form, gpu_count: '17' }, inventory)['gpu.count']).toContain('from 1 to 16');
    expect(validate({ ...form, gpu_model: 'A100' }, inventory)['gpu.model']).toBe('Choose a GPU model.');
    expect(validate({ ...form, gpu_count: '1' }, inventory)).toEqual({});
    // Off means not asked for, whatever the fields hold.
    expect(validate({ ...form, gpu_enabled: false }, inventory)).toEqual({});
  });

  it('reads sizes as edtd does', () => {
    expect(parseSize('512M')).toBe(512 * 1024 ** 2);
    expect(parseSize('1Gi')).toBe(1024 ** 3);
    expect(parseSize('64KiB')).toBe(64 * 1024);
    expect(parseSize('1.5g')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('100')).toBe(100);
    expect(parseSize('1 GB')).toBeNull();
    expect(parseSize('1X')).toBeNull();
    expect(parseSize('lots')).toBeNull();
    expect(validate({ ...good(), shm_enabled: true, shm: '1X' }, inventory).shm).toContain('is not a size');
    expect(validate({ ...good(), shm_enabled: true, shm: '512K' }, inventory).shm).toContain('outside 1M to 256Gi');
    expect(validate({ ...good(), shm_enabled: true, shm: '257G' }, inventory).shm).toContain('outside 1M to 256Gi');
    expect(validate({ ...good(), shm_enabled: true, shm: '256Gi' }, inventory).shm).toBeUndefined();
  });

  it('checks a memory bound against its range and the shared memory, and sends it only when given', () => {
    expect(validate(good(), inventory).memory).toBeUndefined();
    expect(toSpec(good()).memory).toBeUndefined();
    expect(validate({ ...good(), memory: 'lots' }, inventory).memory).toContain('is not a size');
    expect(validate({ ...good(), memory: '64Mi' }, inventory).memory).toContain('outside 128M to 16Ti');
    expect(validate({ ...good(), memory: '128Mi' }, inventory).memory).toBeUndefined();
    expect(validate({ ...good(), shm_enabled: true, shm: '1Gi', memory: '1Gi' }, inventory).memory).toContain('ask for at least 1088M');
    expect(validate({ ...good(), shm_enabled: true, shm: '1Gi', memory: '1088Mi' }, inventory).memory).toBeUndefined();
    expect(toSpec({ ...good(), memory: ' 8Gi ' }).memory).toBe('8Gi');
  });

  it('checks a CPU bound as edtd reads it, and sends it only when given', () => {
    expect(validate(good(), inventory).cpus).toBeUndefined();
    expect(toSpec(good()).cpus).toBeUndefined();
    for (const cpus of ['1.5', '0.01', '2', '1024', '1.234', ' 0.5 ']) expect(validate({ ...good(), cpus }, inventory).cpus).toBeUndefined();
    for (const cpus of ['abc', '-1', '1.2345', '1.', '.5', '1e3']) expect(validate({ ...good(), cpus }, inventory).cpus).toContain('is not a number of CPUs');
    for (const cpus of ['0', '0.009', '2000', '1024.001']) expect(validate({ ...good(), cpus }, inventory).cpus).toContain('is outside 0.01 to 1024 CPUs');
    expect(toSpec({ ...good(), cpus: ' 1.5 ' }).cpus).toBe('1.5');
  });

  it('reads drain timeouts as edtd does and sends only a changed one', () => {
    expect(parseDuration('60s')).toBe(60000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2m')).toBe(120000);
    expect(parseDuration('45')).toBe(45000);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('1 s')).toBeNull();
    expect(parseDuration('5q')).toBeNull();
    expect(emptyForm().drain_timeout).toBe('60s');
    expect(validate({ ...good(), drain_timeout: '5q' }, inventory).drain_timeout).toContain('is not a duration');
    expect(validate({ ...good(), drain_timeout: '-5s' }, inventory).drain_timeout).toContain('is negative');
    expect(validate({ ...good(), drain_timeout: '2h' }, inventory).drain_timeout).toContain('longer than 3600s');
    expect(validate({ ...good(), drain_timeout: '0s' }, inventory).drain_timeout).toBeUndefined();
    expect(toSpec(good()).drain_timeout).toBeUndefined();
    expect(toSpec({ ...good(), drain_timeout: ' 2m ' }).drain_timeout).toBe('2m');
  });

  it.each([
    ['/root/data', null],
    ['/mnt/a-b/c', null],
    ['data', 'is relative'],
    ['/root/../etc', 'contains ".."'],
    ['/root//data', 'not normalised'],
    ['/root/data/', 'not normalised'],
    ['/root/./data', 'not normalised'],
    ['/', "container's root"],
    ['/root', "container's home"],
    ['/etc', 'system directory /etc'],
    ['/usr/lib/x', 'system directory /usr'],
    ['/tmp', 'system directory /tmp'],
    ['/data', null],
    ['/etcetera', null],
    ['', 'Enter the path'],
  ])('checks the mount path %j', (path, message) => {
    const result = checkMountPath(path);
    if (message === null) expect(result).toBeNull();
    else expect(result).toContain(message);
  });

  it('names the mount a path error belongs to, and refuses overlapping paths', () => {
    const form = {
      ...good(),
      mounts: [
        { volume: 'data', path: '/root/data', read_only: false },
        { volume: 'ckpt', path: '/root/data/ckpt', read_only: true },
        { volume: 'nope', path: 'rel', read_only: false },
      ],
    };
    const errors = validate(form, inventory);
    expect(errors['mounts[0].path']).toBeUndefined();
    expect(errors['mounts[1].path']).toBe('/root/data/ckpt overlaps volume 1 at /root/data; choose a separate path.');
    expect(errors['mounts[2].volume']).toContain('Unknown volume "nope"');
    expect(errors['mounts[2].path']).toContain('is relative');
  });
});

describe('megatron parallel sizes', () => {
  const megatron = () => ({ ...good(), framework: 'megatron', image: 'ds', containers: '4' });

  it('accepts sizes that divide the GPUs and sends only the given ones', () => {
    const form = { ...megatron(), gpu_enabled: true, gpu_model: 'NVIDIA-P4', gpu_count: '1', pipeline_parallel: '2' };
    expect(validate(form, inventory)).toEqual({});
    expect(toSpec(form).megatron).toEqual({ pipeline_parallel: 2 });
    expect(toSpec({ ...form, tensor_parallel: '2' }).megatron).toEqual({ tensor_parallel: 2, pipeline_parallel: 2 });
    expect(toSpec(megatron()).megatron).toBeUndefined();
  });

  it('refuses sizes that do not divide the GPUs, naming counts that fit', () => {
    const form = { ...megatron(), containers: '3', tensor_parallel: '2' };
    expect(validate(form, inventory).megatron).toBe(
      '3 containers × 1 GPU = 3 GPUs, which tensor × pipeline = 2 does not divide; ask for 2, 4, 6 … containers, or other sizes.',
    );
  });

  it('refuses sizes that are not whole numbers in range, and ignores them for other frameworks', () => {
    expect(validate({ ...megatron(), tensor_parallel: '0' }, inventory)['megatron.tensor_parallel']).toContain('from 1 to 1024');
    expect(validate({ ...megatron(), pipeline_parallel: 'x' }, inventory)['megatron.pipeline_parallel']).toContain('whole number');
    const horovod = { ...good(), containers: '3', tensor_parallel: '2' };
    expect(validate(horovod, inventory)).toEqual({});
    expect(toSpec(horovod).megatron).toBeUndefined();
  });
});


describe('elastic bounds and priority', () => {
  const elastic = (min: string, max: string, containers = '4') => ({ ...good(), containers, elastic: true, min_containers: min, max_containers: max });

  it('sends min, max and priority only when given', () => {
    expect(validate(elastic('2', '8'), inventory)).toEqual({});
    expect(toSpec({ ...elastic('2', '8'), priority: '50' })).toMatchObject({ containers: 4, min_containers: 2, max_containers: 8, priority: 50 });
    const noMin = toSpec(elastic('', '8'));
    expect(noMin.max_containers).toBe(8);
    expect('min_containers' in noMin).toBe(false);
    const fixed = toSpec({ ...good(), min_containers: '2', max_containers: '8' });
    expect('max_containers' in fixed || 'priority' in fixed).toBe(false);
  });

  it('keeps min <= containers <= max, naming the field at fault', () => {
    expect(validate(elastic('5', '3'), inventory).min_containers).toContain('more than the largest 3');
    expect(validate(elastic('2', '3'), inventory).containers).toBe('4 containers is outside the elastic bounds 2..3; start at a size in that range.');
    expect(validate(elastic('', '3'), inventory).containers).toContain('outside the elastic bounds 4..3');
    expect(validate(elastic('2', ''), inventory).max_containers).toContain('largest size');
    expect(validate(elastic('1', '65'), inventory)).toMatchObject({ min_containers: expect.stringContaining('from 2 to 64'), max_containers: expect.stringContaining('from 2 to 64') });
  });

  it('refuses a priority outside 0 to 100', () => {
    expect(validate({ ...good(), priority: '101' }, inventory).priority).toContain('from 0 to 100');
    expect(validate({ ...good(), priority: '-1' }, inventory).priority).toContain('from 0 to 100');
    expect(validate({ ...good(), priority: '100' }, inventory)).toEqual({});
  });
});
