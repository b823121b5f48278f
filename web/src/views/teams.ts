// Teams and quotas (docs/platform.md, "Queues, teams and quotas"). The admin
// sees every team with its members and, per GPU model, its guarantee, borrow
// limit, GPUs in use, borrowed and pending; creates and deletes teams, sets
// and deletes quotas, and puts users in a team. A user sees their own
// team's usage, read-only. Usage is refreshed every two seconds; edtd's
// refusals are shown next to the field or in the row they concern.

import type { QuotaUsage, Team } from '../api';
import type { Context } from '../app';
import { h, keepFocus, replace } from '../dom';
import { contract } from '../generated/api';
import { checkResourceName } from '../platform';
import { confirmDialog } from './dialog';
import { type Field, clearErrors, field, plainMessage, showError } from './fields';

// A borrow limit at the contract's maximum means no limit (as `edt team
// quota set --borrow unlimited` sends it).
export const kUnlimited = contract.QuotaCount.maximum;

export function borrowText(limit: number): string {
  return limit >= kUnlimited ? 'unlimited' : String(limit);
}

// A quota's GPU count as typed: a whole number from 0 to the contract's
// maximum ("unlimited" too, where allowed). Returns the number or the problem.
export function parseQuotaCount(text: string, what: string, unlimited: boolean): number | string {
  const t = text.trim().toLowerCase();
  if (unlimited && t === 'unlimited') return kUnlimited;
  if (/^\d+$/.test(t) && Number(t) <= kUnlimited) return Number(t);
  return `Enter ${what} as a whole number of GPUs from 0 to ${kUnlimited}${unlimited ? ', or unlimited' : ''}.`;
}

const kUsageColumns = ['GPU model', 'Guaranteed', 'Borrow limit', 'In use', 'Borrowed', 'Pending'];

// One team's quotas as a table; onDelete (the admin's) adds a delete button per row.
function quotaTable(team: Team, rowErrors: Map<string, string>, onDelete?: (model: string) => void): HTMLElement {
  const key = (model: string) => `${team.name}/${model}`;
  const row = (q: QuotaUsage) =>
    h(
      'tr',
      { 'data-quota': key(q.gpu_model) },
      h('th', { scope: 'row' }, q.gpu_model),
      h('td', { 'data-label': 'Guaranteed', class: 'num' }, String(q.guaranteed)),
      h('td', { 'data-label': 'Borrow limit', class: 'num', 'data-col': 'borrow' }, borrowText(q.borrow_limit)),
      h('td', { 'data-label': 'In use', class: 'num', 'data-col': 'in-use' }, String(q.in_use)),
      h('td', { 'data-label': 'Borrowed', class: 'num', 'data-col': 'borrowed' }, String(q.borrowed)),
      h('td', { 'data-label': 'Pending', class: 'num', 'data-col': 'pending' }, String(q.pending)),
      onDelete
        ? h(
            'td',
            {},
            h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete the ${q.gpu_model} quota of ${team.name}`, onclick: () => onDelete(q.gpu_model) }, 'Delete'),
            h('p', { class: 'field-error', role: 'alert', 'data-row-error': key(q.gpu_model) }, rowErrors.get(key(q.gpu_model)) ?? ''),
          )
        : null,
    );
  const columns = onDelete ? [...kUsageColumns, ''] : kUsageColumns;
  return h(
    'table',
    { class: 'list', 'data-quotas': team.name },
    h('thead', {}, h('tr', {}, columns.map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions'))))),
    h('tbody', {}, team.quotas.length ? team.quotas.map(row) : h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, 'No quota: no guarantee and no limit on any GPU model.'))),
  );
}

function members(team: Team): HTMLElement {
  return h('p', { class: 'muted', 'data-members': team.name }, team.members.length ? `Members: ${team.members.join(', ')}` : 'No members yet.');
}

// A user: their own team, read-only.
function ownTeamView(ctx: Context, root: HTMLElement): void {
  const body = h('div', { id: 'own-team' });
  root.append(h('div', { class: 'toolbar' }, h('h1', { id: 'teams-title' }, 'Your team')), body);
  ctx.poll(async () => {
    const [team] = await ctx.api.listTeams();
    replace(
      body,
      team
        ? h('section', { class: 'scroll', 'aria-labelledby': 'own-team-name', tabindex: '0', 'data-team': team.name }, h('h2', { id: 'own-team-name' }, team.name), members(team), quotaTable(team, new Map()))
        : h('p', { class: 'empty', id: 'no-team' }, 'You are in no team: your clusters have no guarantee and no limit. The admin puts users in teams.'),
    );
  }, 2000);
}

function select(id: string, options: [string, string][], keep = ''): HTMLSelectElement {
  return h('select', { id }, options.map(([value, text]) => h('option', { value, selected: value === keep }, text))) as HTMLSelectElement;
}

// Replaces a select's options, keeping its choice where it still exists.
function setOptions(control: HTMLSelectElement, options: [string, string][]): void {
  const keep = control.value;
  replace(control, options.map(([value, text]) => h('option', { value, selected: value === keep }, text)));
}

export async function teamsView(ctx: Context, root: HTMLElement): Promise<void> {
  const me = await ctx.api.whoami();
  if (!me.admin) return ownTeamView(ctx, root);
  const [users, gpus] = await Promise.all([ctx.api.listUsers(), ctx.api.listGpus()]);
  let teams: Team[] = [];
  const rowErrors = new Map<string, string>();
  const list = h('div', { class: 'stack', id: 'teams-list' });
  const forms = adminForms(ctx, users.map((u) => u.name), gpus.map((g) => g.model), () => load());

  function render(): void {
    forms.teamsChanged(teams.map((t) => t.name));
    replace(
      list,
      teams.length
        ? teams.map((t) =>
            h(
              'section',
              { class: 'card scroll', 'data-team': t.name, 'aria-labelledby': `team-${t.name}-title`, tabindex: '0' },
              h(
                'div',
                { class: 'toolbar' },
                h('h2', { id: `team-${t.name}-title` }, t.name),
                h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete team ${t.name}`, onclick: () => void removeTeam(t.name) }, 'Delete team'),
              ),
              h('p', { class: 'field-error', role: 'alert', 'data-row-error': t.name }, rowErrors.get(t.name) ?? ''),
              members(t),
              quotaTable(t, rowErrors, (model) => void removeQuota(t.name, model)),
            ),
          )
        : h('p', { class: 'empty' }, 'No teams yet: every user has no guarantee and no limit.'),
    );
  }

  async function load(): Promise<void> {
    teams = (await ctx.api.listTeams()).sort((a, b) => a.name.localeCompare(b.name));
    keepFocus(list, render);
  }

  // Asks, runs the change, shows a refusal in the row `key`, reloads.
  async function change(key: string, title: string, body: string, run: () => Promise<void>): Promise<void> {
    rowErrors.delete(key);
    if (!(await confirmDialog({ title, body, confirm: 'Delete', danger: true }))) return;
    try {
      await run();
      ctx.notify(`${title.replace(/^Delete/, 'Deleted').replace(/\?$/, '')}.`);
    } catch (e) {
      rowErrors.set(key, plainMessage(e));
    }
    await load();
  }

  const removeTeam = (name: string) => change(name, `Delete team ${name}?`, 'Its quotas go; its members are left without a team.', () => ctx.api.deleteTeam(name));
  const removeQuota = (team: string, model: string) =>
    change(`${team}/${model}`, `Delete the ${model} quota of ${team}?`, 'The team keeps no guarantee and no limit on this model.', () => ctx.api.deleteQuota(team, model));

  root.append(h('div', { class: 'toolbar' }, h('h1', { id: 'teams-title' }, 'Teams and quotas')), h('div', { class: 'stack' }, list, forms.el));
  ctx.poll(load, 2000);
}

interface AdminForms {
  el: HTMLElement;
  // The team selects follow the list.
  teamsChanged(names: string[]): void;
}

// The admin's three forms: create a team, set a quota, put a user in a team.
function adminForms(ctx: Context, users: string[], models: string[], reload: () => Promise<void>): AdminForms {
  const teamSelects: HTMLSelectElement[] = [];
  const create = createTeamForm(ctx, reload);
  const quota = quotaForm(ctx, models, reload, teamSelects);
  const assign = assignForm(ctx, users, reload, teamSelects);
  return {
    el: h('div', { class: 'stack' }, create, quota, assign),
    teamsChanged(names) {
      create.dataset.taken = names.join(' ');
      teamSelects.forEach((s) => setOptions(s, [...(s.id === 'assign-team' ? [['', '(no team)'] as [string, string]] : []), ...names.map((n) => [n, n] as [string, string])]));
    },
  };
}

// A card form: its fields, an error line, a submit button; submit runs
// `send` after clearing the errors and puts a refusal where it belongs.
function cardForm(id: string, title: string, button: string, fields: Record<string, Field>, send: (formError: HTMLElement) => Promise<void>): HTMLFormElement {
  const formError = h('p', { class: 'field-error', id: `${id}-error`, role: 'alert' });
  const form = h(
    'form',
    { class: 'card form', id, novalidate: true, 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title),
    Object.values(fields).map((f) => f.el),
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: `${id}-submit` }, button)),
  ) as HTMLFormElement;
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError);
    try {
      await send(formError);
    } catch (err) {
      showError(err, fields, formError);
    }
  });
  return form;
}

// Sets the first problem next to its field and focuses it; true if there was one.
function refuse(fields: Record<string, Field>, problems: [string, string | null][]): boolean {
  problems.forEach(([f, p]) => fields[f].set(p));
  const first = problems.find(([, p]) => p);
  if (first) fields[first[0]].control.focus();
  return first !== undefined;
}

function createTeamForm(ctx: Context, reload: () => Promise<void>): HTMLFormElement {
  const fields = { name: field('team-name', 'name', 'Name', h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'ml' }), 'A DNS label.') };
  const form = cardForm('team-form', 'Create a team', 'Create team', fields, async () => {
    const input = fields.name.control as HTMLInputElement;
    const name = input.value.trim();
    const taken = (form.dataset.taken ?? '').split(' ').filter(Boolean);
    if (refuse(fields, [['name', name === '' ? 'Give the team a name, e.g. ml.' : checkResourceName(name, 'team', taken)]])) return;
    await ctx.api.createTeam(name);
    input.value = '';
    ctx.notify(`Created team ${name}.`);
    await reload();
  });
  return form;
}

function quotaForm(ctx: Context, models: string[], reload: () => Promise<void>, teamSelects: HTMLSelectElement[]): HTMLFormElement {
  const team = select('quota-team', []);
  teamSelects.push(team);
  const fields: Record<string, Field> = {
    team: field('quota-team', 'team', 'Team', team),
    gpu_model: field('quota-model', 'gpu_model', 'GPU model', select('quota-model', models.map((m) => [m, m]))),
    guaranteed: field('quota-guaranteed', 'guaranteed', 'Guaranteed GPUs', h('input', { type: 'text', class: 'short', inputmode: 'numeric', value: '0' }), "The team's own whenever it asks: GPUs other teams borrowed drain to give them back."),
    borrow_limit: field('quota-borrow', 'borrow_limit', 'Borrow limit', h('input', { type: 'text', class: 'short', value: 'unlimited', spellcheck: 'false' }), 'GPUs more it may hold while no one’s guarantee needs them: a number, or unlimited.'),
  };
  const value = (f: string) => (fields[f].control as HTMLInputElement | HTMLSelectElement).value;
  return cardForm('quota-form', 'Set a quota', 'Set quota', fields, async () => {
    const guaranteed = parseQuotaCount(value('guaranteed'), 'the guaranteed GPUs', false);
    const borrow = parseQuotaCount(value('borrow_limit'), 'the borrow limit', true);
    const problems: [string, string | null][] = [
      ['team', value('team') ? null : 'Create a team first.'],
      ['gpu_model', value('gpu_model') ? null : 'This platform has no GPUs to share.'],
      ['guaranteed', typeof guaranteed === 'string' ? guaranteed : null],
      ['borrow_limit', typeof borrow === 'string' ? borrow : null],
    ];
    if (refuse(fields, problems)) return;
    await ctx.api.setQuota(value('team'), value('gpu_model'), { guaranteed: guaranteed as number, borrow_limit: borrow as number });
    ctx.notify(`Set the ${value('gpu_model')} quota of ${value('team')}.`);
    await reload();
  });
}

function assignForm(ctx: Context, users: string[], reload: () => Promise<void>, teamSelects: HTMLSelectElement[]): HTMLFormElement {
  const team = select('assign-team', [['', '(no team)']]);
  teamSelects.push(team);
  const fields: Record<string, Field> = {
    user: field('assign-user', 'user', 'User', select('assign-user', users.map((u) => [u, u]))),
    team: field('assign-team', 'team', 'Team', team, 'A user is in one team at most; (no team) takes them out of theirs.'),
  };
  const value = (f: string) => (fields[f].control as HTMLSelectElement).value;
  return cardForm('assign-form', 'Put a user in a team', 'Save', fields, async () => {
    if (refuse(fields, [['user', value('user') ? null : 'Create a user first.']])) return;
    await ctx.api.setUserTeam(value('user'), value('team'));
    ctx.notify(value('team') ? `${value('user')} is in team ${value('team')}.` : `${value('user')} is in no team.`);
    await reload();
  });
}

