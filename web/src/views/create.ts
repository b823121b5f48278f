// The create-cluster form, as the product brief draws it: framework, name,
// containers, image, GPU, shared memory, memory and CPU bounds, volumes. Mistakes are shown next to
// their field before submitting; edtd's errors land in the same places.

import { ApiError, type GpuModel, type Image, type Volume } from '../api';
import type { Context } from '../app';
import { describe } from '../app';
import { attr, h, keepFocus, replace } from '../dom';
import { type ClusterForm, type FieldErrors, emptyForm, imagesFor, kDefaultDrain, kFrameworks, kMaxPriority, kMinContainers, kMinPriority, parseCount, toSpec, validate } from '../validate';

// The id of the control that shows a field's error.
function controlId(field: string): string {
  return `f-${field.replace(/[^a-z0-9]+/gi, '-').replace(/-$/, '')}`;
}

// edtd's field names that the form spells differently.
const kServerFieldAliases: Record<string, string> = {
  gpu: 'gpu.model',
  'gpu.model': 'gpu.model',
  shm_size: 'shm',
  spec: 'form',
};

// Each cluster type in a line, and what a cluster of it gives
// (docs/cluster-types.md says more).
export const kFrameworkGuide: Record<string, { line: string; gives: string[] }> = {
  horovod: {
    line: 'Horovod-style jobs with edtrun or mpirun, elastic: a job can grow and shrink with the cluster.',
    gives: ['/etc/mpi/hostfile and discover_hosts.sh, kept current', 'ssh between containers', 'edtrun and mpirun'],
  },
  deepspeed: {
    line: "DeepSpeed's own launcher: deepspeed --hostfile /job/hostfile train.py starts every container over pdsh.",
    gives: [
      '/job/hostfile (host slots=GPUs)',
      'pdsh over ssh to every container',
      '~/.deepspeed_env exported to every node',
      'mpirun over eth0 for its OpenMPI runner',
    ],
  },
  megatron: {
    line: "Megatron-LM's torchrun on every container at once: edtrun --per-host torchrun … pretrain_gpt.py.",
    gives: [
      'MASTER_ADDR, MASTER_PORT, NODE_RANK, GPUS_PER_NODE and CUDA_DEVICE_MAX_CONNECTIONS=1',
      'NNODES and a free port from edtrun --per-host, right after every scale',
      'tensor × pipeline parallel sizes checked against the GPUs',
    ],
  },
};

function gpuLabel(g: GpuModel): string {
  return `${g.model} — ${g.free} of ${g.total} free${g.simulated ? ' (simulated)' : ''}`;
}

export async function createView(ctx: Context, root: HTMLElement): Promise<void> {
  const [images, gpus, volumes, clusters]: [Image[], GpuModel[], Volume[], { name: string }[]] = await Promise.all([
    ctx.api.listImages(),
    ctx.api.listGpus(),
    ctx.api.listVolumes(),
    ctx.api.listClusters(),
  ]);
  const inventory = { images, gpus, volumes, taken_names: clusters.map((c) => c.name) };
  const form: ClusterForm = emptyForm();
  form.image = imagesFor(form.framework, images)[0]?.name ?? '';
  form.gpu_model = gpus[0]?.model ?? '';
  let errors: FieldErrors = {};
  let submitted = false;
  let busy = false;

  const el = h('form', { class: 'card form', id: 'create-form', novalidate: true, 'aria-labelledby': 'create-title' });

  function fieldError(field: string): HTMLElement {
    return h('p', { class: 'field-error', id: `${controlId(field)}-error`, 'data-error-for': field, role: 'alert' }, errors[field] ?? '');
  }

  // Marks a control invalid and points it at its error text.
  function control<T extends HTMLElement>(field: string, node: T, help?: string): T {
    node.id = controlId(field);
    node.dataset.field = field;
    const described = [help ? `${controlId(field)}-help` : '', `${controlId(field)}-error`].filter(Boolean).join(' ');
    node.setAttribute('aria-describedby', described);
    if (errors[field]) node.setAttribute('aria-invalid', 'true');
    return node;
  }

  function help(field: string, ...text: (string | Node)[]): HTMLElement {
    return h('p', { class: 'help', id: `${controlId(field)}-help` }, ...text);
  }

  // A control's handler: update the form, re-check it once the user has
  // submitted, and re-render when the form's shape changed.
  function onInput(update: (target: HTMLInputElement) => void, rerender = false): EventListener {
    return (e: Event) => {
      update(e.target as HTMLInputElement);
      if (submitted) errors = validate(form, inventory);
      if (rerender) keepFocus(el, render);
      else refresh();
    };
  }

  // Updates what depends on typed text without rebuilding the form, so the
  // caret stays where it is.
  function refresh(): void {
    el.querySelectorAll<HTMLElement>('[data-error-for]').forEach((p) => {
      const field = p.dataset.errorFor!;
      p.textContent = errors[field] ?? '';
      const input = el.querySelector(attr('data-field', field));
      if (errors[field]) input?.setAttribute('aria-invalid', 'true');
      else input?.removeAttribute('aria-invalid');
    });
    const note = el.querySelector(`#${controlId('containers')}-help`);
    if (note) note.textContent = containersNote();
  }

  // "kb-worker-0", "kb-worker-0 and kb-worker-1", "kb-worker-0 … kb-worker-4".
  function workerNames(name: string, workers: number): string {
    const last = `${name}-worker-${workers - 1}`;
    return workers === 1 ? last : `${name}-worker-0 ${workers === 2 ? 'and' : '…'} ${last}`;
  }

  function containersNote(): string {
    const name = form.name.trim() || 'NAME';
    const n = parseCount(form.containers);
    const workers = n !== null && n >= kMinContainers ? ` (${workerNames(name, n - 1)})` : '';
    return `At least ${kMinContainers}. One is the launcher (${name}-launcher), the rest are workers${workers}.`;
  }

  function frameworkGuide(): HTMLElement | null {
    const guide = kFrameworkGuide[form.framework];
    if (!guide) return null;
    return h('div', { class: 'help', id: 'framework-guide' }, h('p', {}, guide.line), h('ul', {}, guide.gives.map((g) => h('li', {}, g))));
  }

  function sizeField(field: 'tensor_parallel' | 'pipeline_parallel', label: string): HTMLElement {
    const key = `megatron.${field}`;
    return h(
      'div',
      { class: 'field' },
      h('label', { for: controlId(key) }, label),
      control(
        key,
        h('input', {
          type: 'number',
          min: 1,
          step: 1,
          class: 'short',
          placeholder: '1',
          value: form[field],
          oninput: onInput((t) => (form[field] = t.value)),
        }),
      ),
      fieldError(key),
    );
  }

  // A short text field: its label, input, help and error.
  function textField(field: 'shm' | 'memory' | 'cpus' | 'drain_timeout', label: string, text: string, placeholder?: string): HTMLElement {
    return h(
      'div',
      { class: 'field' },
      h('label', { for: controlId(field) }, label),
      control(
        field,
        h('input', { type: 'text', class: 'short', value: form[field], placeholder, spellcheck: 'false', oninput: onInput((t) => (form[field] = t.value)) }),
        field,
      ),
      help(field, text),
      fieldError(field),
    );
  }

  // Megatron-LM's model-parallel sizes; only for that framework.
  function megatronFields(): HTMLElement | null {
    if (form.framework !== 'megatron') return null;
    return h(
      'fieldset',
      { class: 'field', id: controlId('megatron'), 'data-field': 'megatron', 'aria-describedby': `${controlId('megatron')}-help ${controlId('megatron')}-error` },
      h('legend', {}, 'Model parallelism (optional)'),
      h('div', { class: 'row' }, sizeField('tensor_parallel', 'Tensor parallel'), sizeField('pipeline_parallel', 'Pipeline parallel')),
      help('megatron', "The sizes your job passes to Megatron-LM; the cluster's GPUs (1 per container without GPUs) must divide by tensor × pipeline, now and after every scale."),
      fieldError('megatron'),
    );
  }

  // The scheduler's part (docs/platform.md, "Elastic clusters"): elastic
  // bounds, shown when asked for, and the queue's priority.
  function schedulingFields(): HTMLElement {
    type Count = ['min_containers' | 'max_containers' | 'priority', string, string];
    const bounds: Count[] = [
      ['min_containers', 'Min containers', form.containers],
      ['max_containers', 'Max containers', '8'],
    ];
    const counts: Count[] = [...(form.elastic ? bounds : []), ['priority', `Priority (${kMinPriority}–${kMaxPriority})`, String(kMinPriority)]];
    return h(
      'fieldset',
      { class: 'field', id: 'scheduling', 'aria-describedby': `${controlId('scheduling')}-help` },
      h('legend', {}, 'Scheduling (optional)'),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', id: 'elastic-enabled', checked: form.elastic, onchange: onInput((t) => (form.elastic = t.checked), true) }), 'Elastic'),
      h(
        'div',
        { class: 'row top' },
        counts.map(([key, label, placeholder]) =>
          h(
            'div',
            { class: 'field' },
            h('label', { for: controlId(key) }, label),
            control(key, h('input', { type: 'number', min: 0, step: 1, class: 'short', placeholder, value: form[key], oninput: onInput((t) => (form[key] = t.value)) })),
            fieldError(key),
          ),
        ),
      ),
      help(
        'scheduling',
        form.elastic
          ? 'The scheduler starts the cluster at Containers, grows it up to Max into GPUs no team’s guarantee needs, and takes borrowed containers back by draining them, never below Min (empty: Containers). Your jobs use edtrun --min-np/--max-np.'
          : 'Elastic: the scheduler sizes the cluster between a min and a max. Priority orders the queue when GPUs are short: higher first (empty: 0).',
      ),
    );
  }

  function render(): void {
    const offered = imagesFor(form.framework, images);
    const model = gpus.find((g) => g.model === form.gpu_model);
    replace(
      el,
      h('h1', { id: 'create-title' }, 'Create a distributed training cluster'),
      errors['form'] ? h('p', { class: 'form-error', role: 'alert', id: 'form-error' }, errors['form']) : null,

      h(
        'fieldset',
        { class: 'field' },
        h('legend', {}, 'Framework'),
        h(
          'div',
          { class: 'segmented', id: controlId('framework'), role: 'radiogroup', 'aria-describedby': `${controlId('framework')}-error` },
          kFrameworks.map((f) =>
            h(
              'label',
              { class: 'segment' },
              h('input', {
                type: 'radio',
                name: 'framework',
                value: f.id,
                id: `framework-${f.id}`,
                checked: form.framework === f.id,
                onchange: onInput(() => {
                  form.framework = f.id;
                  const images = imagesFor(f.id, inventory.images);
                  if (!images.some((i) => i.name === form.image)) form.image = images[0]?.name ?? '';
                }, true),
              }),
              h('span', {}, f.label),
            ),
          ),
        ),
        frameworkGuide(),
        fieldError('framework'),
      ),

      h(
        'div',
        { class: 'field' },
        h('label', { for: controlId('name') }, 'Name'),
        control(
          'name',
          h('input', { type: 'text', value: form.name, autocomplete: 'off', spellcheck: 'false', placeholder: 'tthvd', oninput: onInput((t) => (form.name = t.value)) }),
          'name',
        ),
        help('name', 'Lower-case letters, digits and "-"; it names the containers and their hosts.'),
        fieldError('name'),
      ),

      h(
        'div',
        { class: 'field' },
        h('label', { for: controlId('containers') }, 'Containers'),
        control(
          'containers',
          h('input', {
            type: 'number',
            min: kMinContainers,
            step: 1,
            inputmode: 'numeric',
            value: form.containers,
            class: 'short',
            oninput: onInput((t) => (form.containers = t.value)),
          }),
          'containers',
        ),
        help('containers', containersNote()),
        fieldError('containers'),
      ),

      h(
        'div',
        { class: 'field' },
        h('label', { for: controlId('image') }, 'Image'),
        control(
          'image',
          h(
            'select',
            { onchange: onInput((t) => (form.image = t.value)) },
            offered.length ? null : h('option', { value: '' }, '(no image carries this framework)'),
            offered.map((i) => h('option', { value: i.name, selected: form.image === i.name }, i.description ? `${i.name} — ${i.description}` : i.name)),
          ),
          'image',
        ),
        help('image', `Only images that carry ${kFrameworks.find((f) => f.id === form.framework)?.label ?? form.framework} are offered.`),
        fieldError('image'),
      ),

      h(
        'fieldset',
        { class: 'field' },
        h('legend', {}, 'GPU'),
        h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            id: 'gpu-enabled',
            checked: form.gpu_enabled,
            onchange: onInput((t) => (form.gpu_enabled = t.checked), true),
          }),
          'Enable GPU',
        ),
        form.gpu_enabled
          ? h(
              'div',
              { class: 'row top', id: 'gpu-row' },
              h(
                'div',
                { class: 'field' },
                h('label', { for: controlId('gpu.model') }, 'Model'),
                control(
                  'gpu.model',
                  h(
                    'select',
                    { onchange: onInput((t) => (form.gpu_model = t.value), true) },
                    gpus.length ? null : h('option', { value: '' }, '(no GPUs on this platform)'),
                    gpus.map((g) => h('option', { value: g.model, selected: form.gpu_model === g.model }, gpuLabel(g))),
                  ),
                ),
                fieldError('gpu.model'),
              ),
              h(
                'div',
                { class: 'field' },
                h('label', { for: controlId('gpu.count') }, 'GPUs per container'),
                control(
                  'gpu.count',
                  h('input', {
                    type: 'number',
                    min: 1,
                    step: 1,
                    class: 'short',
                    value: form.gpu_count,
                    oninput: onInput((t) => (form.gpu_count = t.value)),
                  }),
                  'gpu.count',
                ),
                help('gpu.count', model ? `${model.free} ${model.model} free${model.simulated ? ' (simulated inventory)' : ''}.` : ''),
                fieldError('gpu.count'),
              ),
            )
          : null,
      ),

      megatronFields(),
      schedulingFields(),

      h(
        'fieldset',
        { class: 'field' },
        h('legend', {}, 'Shared memory'),
        h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            id: 'shm-enabled',
            checked: form.shm_enabled,
            onchange: onInput((t) => (form.shm_enabled = t.checked), true),
          }),
          'Enable shared memory (/dev/shm)',
        ),
        form.shm_enabled ? textField('shm', 'Size', 'e.g. 512M or 1Gi (binary units).') : null,
      ),

      textField(
        'memory',
        'Memory per container',
        'The most memory each container may use, its processes and shared memory together, e.g. 8Gi; empty: no bound. Beyond it the kernel stops a process of that container.',
        'no bound',
      ),
      textField(
        'cpus',
        'CPUs per container',
        "The most CPU time each container may use, in CPUs with at most 3 decimals, e.g. 1.5; empty: no bound. Beyond it the kernel slows the container's processes down.",
        'no bound',
      ),
      textField(
        'drain_timeout',
        'Drain timeout',
        `On scale-down a leaving container first leaves the hostfile and is stopped once its edtrun workers have left the job, or after this long (e.g. ${kDefaultDrain}; 0s stops it at once).`,
      ),

      h(
        'fieldset',
        { class: 'field', id: 'mounts' },
        h('legend', {}, 'Storage volumes'),
        volumes.length ? null : h('p', { class: 'help' }, 'No volumes yet; an administrator creates them with ', h('code', {}, 'edt volume create NAME'), '.'),
        form.mounts.map((m, i) =>
          h(
            'div',
            { class: 'row mount', 'data-mount': i },
            h(
              'div',
              { class: 'field' },
              h('label', { for: controlId(`mounts[${i}].volume`) }, `Volume ${i + 1}`),
              control(
                `mounts[${i}].volume`,
                h(
                  'select',
                  {
                    onchange: onInput((t) => {
                      const before = m.volume;
                      m.volume = t.value;
                      if (m.path === '' || m.path === `/root/${before}`) m.path = `/root/${m.volume}`;
                    }, true),
                  },
                  h('option', { value: '' }, 'Choose…'),
                  volumes.map((v) => h('option', { value: v.name, selected: m.volume === v.name }, v.name)),
                ),
              ),
              fieldError(`mounts[${i}].volume`),
            ),
            h(
              'div',
              { class: 'field grow' },
              h('label', { for: controlId(`mounts[${i}].path`) }, 'Mount path'),
              control(
                `mounts[${i}].path`,
                h('input', { type: 'text', value: m.path, spellcheck: 'false', oninput: onInput((t) => (m.path = t.value)) }),
              ),
              fieldError(`mounts[${i}].path`),
            ),
            h(
              'label',
              { class: 'check' },
              h('input', { type: 'checkbox', id: `mount-ro-${i}`, checked: m.read_only, onchange: onInput(() => (m.read_only = !m.read_only)) }),
              'Read-only',
            ),
            h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                'aria-label': `Remove volume ${i + 1}`,
                onclick: onInput(() => form.mounts.splice(i, 1), true),
              },
              'Remove',
            ),
          ),
        ),
        volumes.length
          ? h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                id: 'add-mount',
                onclick: onInput(() => {
                  const unused = volumes.find((v) => !form.mounts.some((m) => m.volume === v.name)) ?? volumes[0];
                  form.mounts.push({ volume: unused.name, path: `/root/${unused.name}`, read_only: false });
                }, true),
              },
              'Add volume',
            )
          : null,
      ),

      h(
        'div',
        { class: 'actions' },
        h('a', { class: 'button secondary', href: '#/clusters' }, 'Cancel'),
        h('button', { type: 'submit', id: 'create-submit', disabled: busy }, busy ? 'Creating…' : 'Create'),
      ),
    );
  }

  function focusFirstError(): void {
    const first = el.querySelector<HTMLElement>('[aria-invalid="true"], #form-error');
    first?.focus();
  }

  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    submitted = true;
    errors = validate(form, inventory);
    if (Object.keys(errors).length) {
      render();
      focusFirstError();
      return;
    }
    busy = true;
    keepFocus(el, render);
    try {
      const cluster = await ctx.api.createCluster(toSpec(form));
      ctx.navigate(`#/clusters/${encodeURIComponent(cluster.name || form.name.trim())}`);
      return;
    } catch (err) {
      const field = err instanceof ApiError && err.field ? kServerFieldAliases[err.field] ?? err.field : 'form';
      const known = field === 'form' || el.querySelector(attr('data-field', field));
      errors = known ? { [field]: describe(err).replace(/ \(field .*\)$/, '') } : { form: describe(err) };
    }
    busy = false;
    render();
    focusFirstError();
  });

  root.append(el);
  render();
  document.getElementById(controlId('name'))?.focus();
}
