import { beforeEach, describe, expect, it } from 'vitest';
import { type Routes, confirmDialogsAtOnce, mount as mountView, tick } from './fake-edtd';
import { borrowText, kUnlimited, parseQuotaCount, teamsView } from './teams';

const settle = async () => {
  for (let i = 0; i < 8; i++) await tick();
};

// The view against a fake edtd; a submit waits for the reload after it.
async function mount(routes: Routes) {
  const v = await mountView(teamsView, routes);
  await settle();
  const submit = async (form: string) => {
    await v.submit(form);
    await settle();
  };
  return { ...v, submit };
}

const ml = {
  name: 'ml',
  members: ['alice'],
  quotas: [{ gpu_model: 'NVIDIA-P4', guaranteed: 4, borrow_limit: kUnlimited, in_use: 6, borrowed: 2, pending: 1 }],
};

beforeEach(confirmDialogsAtOnce);

describe('quota counts', () => {
  it('reads a count or unlimited, and writes the contract maximum as unlimited', () => {
    expect(parseQuotaCount(' 4 ', 'x', false)).toBe(4);
    expect(parseQuotaCount('unlimited', 'the borrow limit', true)).toBe(kUnlimited);
    expect(parseQuotaCount('unlimited', 'the guaranteed GPUs', false)).toBe(`Enter the guaranteed GPUs as a whole number of GPUs from 0 to ${kUnlimited}.`);
    expect(parseQuotaCount('-1', 'x', true)).toContain('or unlimited');
    expect(parseQuotaCount(String(kUnlimited + 1), 'x', true)).toContain(`from 0 to ${kUnlimited}`);
    expect(borrowText(kUnlimited)).toBe('unlimited');
    expect(borrowText(2)).toBe('2');
  });
});

describe('teams, as the admin', () => {
  function routes(): Routes {
    let teams = [ml];
    return {
      'GET /whoami': { status: 200, body: { name: 'admin', admin: true } },
      'GET /users': { status: 200, body: { users: [{ name: 'admin', admin: true }, { name: 'alice', admin: false }, { name: 'bob', admin: false }] } },
      'GET /gpus': { status: 200, body: { gpus: [{ index: 0, model: 'NVIDIA-P4', simulated: true }] } },
      'GET /teams': () => ({ status: 200, body: { teams } }),
      'POST /teams': (body) => {
        teams = [...teams, { name: (body as { name: string }).name, members: [], quotas: [] }];
        return { status: 201, body: teams[teams.length - 1] };
      },
      'PUT /teams/ml/quotas/NVIDIA-P4': { status: 200, body: ml },
      'PUT /users/bob/team': { status: 422, body: { error: { field: 'team', message: 'no team named cv', fix: 'create it first (edt team create cv)' } } },
      'DELETE /teams/ml': { status: 409, body: { error: { message: 'team ml has queued requests', fix: 'wait or delete them first' } } },
    };
  }

  it('lists each team with its members and per-model usage', async () => {
    const v = await mount(routes());
    expect(v.text('[data-members="ml"]')).toBe('Members: alice');
    const row = 'tr[data-quota="ml/NVIDIA-P4"]';
    expect(v.text(`${row} th`)).toBe('NVIDIA-P4');
    expect(v.text(`${row} [data-col="borrow"]`)).toBe('unlimited');
    expect(v.text(`${row} [data-col="in-use"]`)).toBe('6');
    expect(v.text(`${row} [data-col="borrowed"]`)).toBe('2');
    expect(v.text(`${row} [data-col="pending"]`)).toBe('1');
    expect([...v.root.querySelectorAll<HTMLOptionElement>('#assign-user option')].map((o) => o.value)).toEqual(['admin', 'alice', 'bob']);
    expect([...v.root.querySelectorAll<HTMLOptionElement>('#assign-team option')].map((o) => o.value)).toEqual(['', 'ml']);
  });

  it('creates a team after checking its name, and the selects follow', async () => {
    const v = await mount(routes());
    v.type('#team-name', 'ml');
    await v.submit('#team-form');
    expect(v.text('#team-name-error')).toMatch(/A team named "ml" exists already/);
    expect(v.sent.some(([k]) => k === 'POST /teams')).toBe(false);
    v.type('#team-name', 'cv');
    await v.submit('#team-form');
    expect(v.sent).toContainEqual(['POST /teams', { name: 'cv' }]);
    expect(v.root.querySelector('[data-team="cv"]')).not.toBeNull();
    expect([...v.root.querySelectorAll<HTMLOptionElement>('#quota-team option')].map((o) => o.value)).toEqual(['cv', 'ml']);
  });

  it('sets a quota, reading unlimited, and checks the counts before asking', async () => {
    const v = await mount(routes());
    v.type('#quota-team', 'ml');
    v.type('#quota-guaranteed', 'four');
    await v.submit('#quota-form');
    expect(v.text('#quota-guaranteed-error')).toContain('whole number of GPUs');
    expect(v.root.querySelector('#quota-guaranteed')!.getAttribute('aria-invalid')).toBe('true');
    expect(v.sent.some(([k]) => k.startsWith('PUT /teams'))).toBe(false);
    v.type('#quota-guaranteed', '4');
    await v.submit('#quota-form');
    expect(v.text('#quota-guaranteed-error')).toBe('');
    expect(v.sent).toContainEqual(['PUT /teams/ml/quotas/NVIDIA-P4', { guaranteed: 4, borrow_limit: kUnlimited }]);
  });

  it("puts edtd's refusal next to the field it names, or in the team's row", async () => {
    const v = await mount(routes());
    v.type('#assign-user', 'bob');
    await v.submit('#assign-form');
    expect(v.sent).toContainEqual(['PUT /users/bob/team', { team: '' }]);
    expect(v.text('#assign-team-error')).toBe('no team named cv; create it first (edt team create cv)');
    v.root.querySelector<HTMLButtonElement>('[aria-label="Delete team ml"]')!.click();
    await settle();
    expect(v.text('[data-row-error="ml"]')).toBe('team ml has queued requests; wait or delete them first');
  });
});

describe('teams, as a user', () => {
  it("shows their own team's usage, read-only", async () => {
    const v = await mount({
      'GET /whoami': { status: 200, body: { name: 'alice', admin: false } },
      'GET /teams': { status: 200, body: { teams: [ml] } },
    });
    expect(v.text('#own-team h2')).toBe('ml');
    expect(v.text('tr[data-quota="ml/NVIDIA-P4"] [data-col="in-use"]')).toBe('6');
    expect(v.root.querySelector('form, button')).toBeNull();
  });

  it('says so when they are in no team', async () => {
    const v = await mount({
      'GET /whoami': { status: 200, body: { name: 'bob', admin: false } },
      'GET /teams': { status: 200, body: { teams: [] } },
    });
    expect(v.text('#no-team')).toContain('You are in no team');
  });
});
