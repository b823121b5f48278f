// Small multiples in SVG: one line chart per metric (loss, accuracy,
// samples/s), since their scales differ by orders of magnitude. Colours come
// from CSS variables so the charts follow the light or dark theme.

import type { Point } from './logparse';

const kSvgNs = 'http://www.w3.org/2000/svg';
const kWidth = 320;
const kHeight = 160;
const kPad = { left: 48, right: 12, top: 12, bottom: 28 };

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(kSvgNs, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function fmt(v: number): string {
  const a = Math.abs(v);
  if (a >= 10000) return `${(v / 1000).toFixed(0)}k`;
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, '');
  return v.toPrecision(2);
}

export function lineChart(key: string, label: string, points: Point[]): SVGSVGElement {
  const data = points.filter((p) => key in p.values).map((p) => [p.x, p.values[key]] as const);
  const root = svg('svg', { viewBox: `0 0 ${kWidth} ${kHeight}`, class: 'chart', role: 'img', 'data-metric': key, 'data-points': data.length });
  root.append(svg('title', {}, `${label}: ${data.length} points${data.length ? `, last ${fmt(data[data.length - 1][1])}` : ''}`));
  const xs = data.map((d) => d[0]);
  const ys = data.map((d) => d[1]);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - Math.abs(y0 || 1) * 0.1, y1 + Math.abs(y1 || 1) * 0.1];
  const w = kWidth - kPad.left - kPad.right;
  const hgt = kHeight - kPad.top - kPad.bottom;
  const sx = (x: number) => kPad.left + ((x - x0) / (x1 - x0)) * w;
  const sy = (y: number) => kPad.top + (1 - (y - y0) / (y1 - y0)) * hgt;

  root.append(svg('rect', { x: kPad.left, y: kPad.top, width: w, height: hgt, class: 'chart-frame' }));
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    root.append(svg('line', { x1: kPad.left, x2: kPad.left + w, y1: sy(y), y2: sy(y), class: 'chart-grid' }));
    root.append(svg('text', { x: kPad.left - 4, y: sy(y) + 4, 'text-anchor': 'end', class: 'chart-tick' }, fmt(y)));
  }
  for (const x of [x0, x1]) {
    root.append(svg('text', { x: sx(x), y: kHeight - 10, 'text-anchor': 'middle', class: 'chart-tick' }, fmt(x)));
  }
  root.append(svg('text', { x: kPad.left + w / 2, y: kHeight - 2, 'text-anchor': 'middle', class: 'chart-tick' }, 'epoch'));
  if (data.length) {
    const path = data.map(([x, y], i) => `${i ? 'L' : 'M'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
    root.append(svg('path', { d: path, class: `chart-line chart-line-${key.replace(/\W/g, '')}` }));
    for (const [x, y] of data) root.append(svg('circle', { cx: sx(x), cy: sy(y), r: 2.5, class: `chart-dot chart-line-${key.replace(/\W/g, '')}` }));
  }
  return root;
}
