// A hot JavaScript function for the node tests (node --perf-basic-prof): fxprofHotLoop does integer work
// until the process has used MS milliseconds of CPU (argv[2], default 1000).
function fxprofHotLoop(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = (x * 1103515245 + 12345) % 2147483648;
  return x;
}
const ms = Number(process.argv[2] || 1000);
const start = process.cpuUsage();
let sink = 0;
for (;;) {
  sink += fxprofHotLoop(100000);
  const u = process.cpuUsage(start);
  if ((u.user + u.system) / 1000 >= ms) break;
}
console.log(`done ${sink > 0}`);
