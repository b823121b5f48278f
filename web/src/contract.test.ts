// The console's API types and form limits are generated from the API
// contract: this fails when api/openapi.json changed and
// src/generated/api.ts was not regenerated (npm run generate).
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generate, kDocumentPath, kOutputPath } from '../scripts/generate-api.mjs';
import { contract } from './generated/api';
import { checkContainers, checkName, kFrameworks, parseSize } from './validate';

describe('the API contract', () => {
  it('generated/api.ts is what the document generates', () => {
    expect(fs.readFileSync(kOutputPath, 'utf8')).toBe(generate(fs.readFileSync(kDocumentPath, 'utf8')));
  });

  it('the form checks the contract limits', () => {
    const { minimum, maximum } = contract.ContainerCount;
    expect(checkContainers(String(minimum))).toBeNull();
    expect(checkContainers(String(maximum))).toBeNull();
    expect(checkContainers(String(minimum - 1))).not.toBeNull();
    expect(checkContainers(String(maximum + 1))).not.toBeNull();
    expect(checkName('a'.repeat(contract.ClusterName.maxLength), [])).toBeNull();
    expect(checkName('a'.repeat(contract.ClusterName.maxLength + 1), [])).not.toBeNull();
    expect(kFrameworks.map((f) => f.id)).toEqual(contract.Framework.values);
    for (const [unit, bytes] of Object.entries(contract.ShmSize.sizeUnits)) {
      expect(parseSize(`2${unit.toUpperCase()}`)).toBe(2 * bytes);
    }
  });

  it('a changed document changes the generated limits', () => {
    const doc = JSON.parse(fs.readFileSync(kDocumentPath, 'utf8'));
    doc.components.schemas.ContainerCount.maximum += 1;
    expect(generate(JSON.stringify(doc))).not.toBe(fs.readFileSync(kOutputPath, 'utf8'));
  });
});
