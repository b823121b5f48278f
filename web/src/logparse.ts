// Reads training progress out of a job's log. Training scripts print lines
// such as
//
//   epoch=1 loss=0.4213 acc=0.912 samples/s=5230.4
//
// and edtrun tags each worker's lines with its rank ("[0] ...", "[1,0]<stdout>:"
// in mpirun's style, or "rank 0: ..."). A point is one line with at least one
// numeric key=value pair. When ranks are tagged, only the lowest rank that
// printed metrics is charted, so N workers do not give N points per epoch.

export interface Point {
  rank: number | null;
  // The x position: the line's "epoch" (or "step") value, else its order.
  x: number;
  values: Record<string, number>;
}

// The fields the console charts, in order, with the names they go by.
export const kChartFields: { key: string; label: string; aliases: string[] }[] = [
  { key: 'loss', label: 'loss', aliases: ['loss', 'train_loss'] },
  { key: 'acc', label: 'accuracy', aliases: ['acc', 'accuracy', 'val_acc', 'test_acc'] },
  { key: 'samples/s', label: 'samples/s', aliases: ['samples/s', 'samples_per_sec', 'samples_per_second', 'throughput'] },
];

const kRankTag = /^\s*(?:\[(\d+)(?:,\d+)?\](?:<std(?:out|err)>)?:?|rank\s*(\d+)\s*[:|])\s*/i;
const kPair = /([A-Za-z_][\w./-]*)\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?=[\s,;)]|%|$)/g;

export interface ParsedLine {
  rank: number | null;
  values: Record<string, number>;
}

export function parseLine(line: string): ParsedLine {
  const tag = kRankTag.exec(line);
  const rank = tag ? Number(tag[1] ?? tag[2]) : null;
  const body = tag ? line.slice(tag[0].length) : line;
  const values: Record<string, number> = {};
  for (const m of body.matchAll(kPair)) values[m[1]] = Number(m[2]);
  return { rank, values };
}

// Maps a parsed line's keys onto the charted fields (loss, acc, samples/s),
// keeping the others under their own names.
function canonical(values: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(values)) {
    const field = kChartFields.find((f) => f.aliases.includes(key.toLowerCase()));
    out[field ? field.key : key] = value;
  }
  return out;
}

// Folds the text of a log into points. Partial last lines are left for the
// next call: pass the unparsed tail back in as `carry`.
export class MetricsParser {
  private carry = '';
  private chartedRank: number | null = null;
  private count = 0;
  readonly points: Point[] = [];

  // Adds text; returns true if new points arrived.
  push(text: string): boolean {
    const lines = (this.carry + text).split(/\r?\n/);
    this.carry = lines.pop() ?? '';
    return lines.map((l) => this.add(l)).some(Boolean);
  }

  // Parses what is left once the log has ended.
  finish(): boolean {
    const added = this.carry ? this.add(this.carry) : false;
    this.carry = '';
    return added;
  }

  private add(line: string): boolean {
    const parsed = parseLine(line);
    const values = canonical(parsed.values);
    if (!kChartFields.some((f) => f.key in values)) return false;
    if (parsed.rank !== null) {
      if (this.chartedRank === null || parsed.rank < this.chartedRank) {
        // A lower rank showed up: chart it alone from now on.
        if (this.chartedRank !== null) this.points.splice(0, this.points.length, ...this.points.filter((p) => p.rank === parsed.rank));
        this.chartedRank = parsed.rank;
      }
      if (parsed.rank !== this.chartedRank) return false;
    }
    const x = values['epoch'] ?? values['step'] ?? this.count;
    this.count += 1;
    this.points.push({ rank: parsed.rank, x, values });
    return true;
  }

  // The charted fields that appear in at least one point.
  fields(): typeof kChartFields {
    return kChartFields.filter((f) => this.points.some((p) => f.key in p.values));
  }
}
