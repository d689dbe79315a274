// V8 reusing code addresses (issue 22): PHASES rounds (argv[2], default 6) of compiling much throw-away
// code, collecting it, then sorting with a hot comparator that is compiled afresh each round (a new
// function named fxprofCompare), so its code lands where other functions were. Sort rounds take SORT_MS
// milliseconds of CPU each (argv[3], default 150).
const phases = Number(process.argv[2] || 6);
const sortMs = Number(process.argv[3] || 150);

function churn(round) {
  let sink = 0;
  for (let i = 0; i < 1500; i++) {
    const f = new Function('x', `let s = ${i}; for (let j = 0; j < 40; j++) s = (s * 31 + x + j + ${round}) | 0; return s;`);
    for (let k = 0; k < 60; k++) sink ^= f(k);
  }
  if (globalThis.gc) globalThis.gc();
  return sink;
}

let sink = 0;
for (let round = 0; round < phases; round++) {
  console.log(`round ${round}`);  // the attach test waits for a round that follows another
  sink ^= churn(round);
  // A consistent order (by a hash of each value) that costs more than the sort's own work.
  const compare = new Function(`return function fxprofCompare(a, b) {
    let x = a ^ ${round}, y = b ^ ${round};
    for (let i = 0; i < 12; i++) { x = Math.imul(x, 0x9E3779B1) + 7 | 0; y = Math.imul(y, 0x9E3779B1) + 7 | 0; }
    return x - y;
  }`)();
  const start = process.cpuUsage();
  for (;;) {
    const a = [];
    for (let i = 0; i < 20000; i++) a.push((i * 2654435761) % 1000003);
    a.sort(compare);
    sink ^= a[7];
    const u = process.cpuUsage(start);
    if ((u.user + u.system) / 1000 >= sortMs) break;
  }
}
console.log(`done ${sink !== 0.5}`);
