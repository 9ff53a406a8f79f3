// MCP Tasks against pyexec with the official TypeScript SDK's experimental
// task client (client.experimental.tasks), as a real client application
// would use it. Run by TestTasksWithTypeScriptClient:
//
//   PYEXEC_MCP_COMMAND='["/path/to/pyexec","mcp",...]' node client.mjs   (stdio)
//   PYEXEC_MCP_URL=http://127.0.0.1:PORT/mcp PYEXEC_TOKEN=... node client.mjs   (Streamable HTTP)
//
// 1. A 30-second run_python job runs as a task: callToolStream creates it,
//    polls tasks/get until it completes and fetches tasks/result; progress
//    notifications carry the related-task metadata; the task is the job
//    (get_job sees it, completed, with the same output).
// 2. Meanwhile another task starts a process tree (python + a child) and is
//    cancelled with tasks/cancel: it is cancelled, every process of the tree
//    is gone, tasks/result has no result for it, tasks/cancel again is
//    refused.
// 3. tasks/list lists both; a tool without task support refuses a task.
//
// Prints one JSON line with what was checked and exits 0 when every check
// passed, 1 otherwise.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail: ok ? undefined : detail });
}

function transport() {
  if (process.env.PYEXEC_MCP_URL) {
    const headers = {};
    if (process.env.PYEXEC_TOKEN) headers.Authorization = 'Bearer ' + process.env.PYEXEC_TOKEN;
    return new StreamableHTTPClientTransport(new URL(process.env.PYEXEC_MCP_URL), { requestInit: { headers } });
  }
  const [command, ...args] = JSON.parse(process.env.PYEXEC_MCP_COMMAND);
  return new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
}

// marked lists live processes whose command line holds mark: a run's pids
// are those of its own PID namespace, so its processes are found by what
// they carry.
async function marked(mark) {
  const fs = await import('node:fs');
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'latin1').includes(mark)) out.push(Number(name));
    } catch (e) { /* gone meanwhile */ }
  }
  return out;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const client = new Client({ name: 'pyexec-tasks-e2e', version: '1.0.0' });
  await client.connect(transport());
  const tasks = client.experimental.tasks;

  const caps = client.getServerCapabilities();
  check('server declares tasks.requests.tools.call, list and cancel', caps?.tasks?.requests?.tools?.call && caps.tasks.list && caps.tasks.cancel, caps);
  const { tools } = await client.listTools();
  const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
  check('run_python, run_python_batch, benchmark_python: taskSupport optional',
    support.run_python === 'optional' && support.run_python_batch === 'optional' && support.benchmark_python === 'optional', support);

  // 1. The 30 s job as a task.
  const code = 'import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(1)\nprint("done")\n';
  const progress = [];
  const statuses = [];
  let longID;
  const started = Date.now();
  const longTask = (async () => {
    const stream = tasks.callToolStream({ name: 'run_python', arguments: { code, timeout: 90 } }, CallToolResultSchema, {
      task: { ttl: 600000 },
      onprogress: (p) => progress.push(p),
      timeout: 120000,
    });
    let result;
    for await (const m of stream) {
      if (m.type === 'taskCreated') longID = m.task.taskId;
      if (m.type === 'taskStatus') statuses.push(m.task.status);
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
    return result;
  })();

  // 2. A task to cancel: python plus a child process, the child marked.
  const mark = `pyexec-mark-tasks-${process.pid}-${Date.now()}`;
  const treeCode = 'import os, subprocess, sys, time\n' +
    `child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "${mark}"])\n` +
    'print("started", flush=True)\ntime.sleep(300)\n';
  const created = await client.request({ method: 'tools/call', params: { name: 'run_python', arguments: { code: treeCode, timeout: 600 } } },
    (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema, { task: { ttl: 600000 } });
  const cancelID = created.task.taskId;
  check('tools/call with task returns a working task at once', created.task.status === 'working' && cancelID && created.task.ttl === 600000, created);
  check('the created task tells the model it runs in the background',
    typeof created._meta?.['io.modelcontextprotocol/model-immediate-response'] === 'string', created._meta);

  // The task is the job: its id is in the task's _meta.
  let jobID;
  for (let i = 0; i < 100 && !jobID; i++) {
    const t = await tasks.getTask(cancelID);
    jobID = t._meta?.['io.github.pyexec/job_id'];
    if (!jobID) await sleep(100);
  }
  check('tasks/get names the backing job', jobID, 'no io.github.pyexec/job_id in the task');
  let treeStarted = false;
  for (let i = 0; i < 100 && !treeStarted; i++) {
    const r = await client.callTool({ name: 'get_job', arguments: { job_id: jobID, wait: 5 } });
    treeStarted = (r.structuredContent?.stdout ?? '').includes('started');
  }
  check('the tree to cancel is running', treeStarted && (await marked(mark)).length === 1, await marked(mark));
  const cancelled = await tasks.cancelTask(cancelID);
  check('tasks/cancel answers cancelled', cancelled.status === 'cancelled', cancelled);
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    gone = (await marked(mark)).length === 0;
    if (!gone) await sleep(50);
  }
  check('tasks/cancel killed the whole process tree', gone, await marked(mark));
  check('tasks/get after cancel: cancelled', (await tasks.getTask(cancelID)).status === 'cancelled');
  const job = await client.callTool({ name: 'get_job', arguments: { job_id: jobID } });
  check('the cancelled task\'s job is cancelled', job.structuredContent?.status === 'cancelled', job.structuredContent?.status);
  try {
    await tasks.cancelTask(cancelID);
    check('tasks/cancel of a cancelled task is refused', false, 'accepted');
  } catch (e) {
    check('tasks/cancel of a cancelled task is refused (-32602)', e.code === -32602, e.message);
  }
  try {
    await tasks.getTaskResult(cancelID, CallToolResultSchema);
    check('tasks/result of a cancelled task is an error', false, 'returned a result');
  } catch (e) {
    check('tasks/result of a cancelled task is an error', true);
  }

  // 3. Listing; a tool without task support.
  const list = await tasks.listTasks();
  const ids = list.tasks.map((t) => t.taskId);
  check('tasks/list has both tasks', ids.includes(cancelID) && longID && ids.includes(longID), ids);
  try {
    await client.request({ method: 'tools/call', params: { name: 'server_info', arguments: {} } },
      (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema, { task: {} });
    check('a task for a tool without task support is refused', false, 'accepted');
  } catch (e) {
    check('a task for a tool without task support is refused (-32601)', e.code === -32601, e.message);
  }

  // Back to the 30 s task.
  const result = await longTask;
  const elapsed = (Date.now() - started) / 1000;
  const out = result?.structuredContent ?? {};
  const want = Array.from({ length: 30 }, (_, i) => String(i)).join('\n') + '\ndone\n';
  check('the 30 s task\'s result is the run\'s', out.stdout === want && out.exit_code === 0 && !result.isError, out);
  check('it ran about 30 s', elapsed >= 29 && elapsed < 55, elapsed);
  check('tasks/result carries related-task metadata', result?._meta?.['io.modelcontextprotocol/related-task']?.taskId === longID, result?._meta);
  check('the client polled tasks/get while it worked', statuses.filter((s) => s === 'working').length >= 5 && statuses.at(-1) === 'completed', statuses);
  const related = progress.filter((p) => p._meta?.['io.modelcontextprotocol/related-task']?.taskId === longID);
  check('progress notifications arrived, with related-task metadata', related.length >= 10, progress.length);
  const again = await tasks.getTaskResult(longID, CallToolResultSchema);
  check('tasks/result again returns the same result', again.structuredContent?.stdout === want);
  const t1 = await tasks.getTask(longID);
  check('tasks/get: completed, with createdAt, lastUpdatedAt and ttl', t1.status === 'completed' && t1.createdAt && t1.lastUpdatedAt && t1.ttl === 600000, t1);
  const longJob = t1._meta?.['io.github.pyexec/job_id'];
  const jr = await client.callTool({ name: 'get_job', arguments: { job_id: longJob } });
  check('the task is the job: get_job sees it completed with the same output',
    jr.structuredContent?.status === 'completed' && jr.structuredContent?.stdout === want, jr.structuredContent?.status);

  await client.close();
}

try {
  await main();
} catch (e) {
  check('no unexpected error', false, String(e?.stack ?? e));
}
const failed = checks.filter((c) => !c.ok);
console.log(JSON.stringify({ passed: checks.length - failed.length, failed: failed.length, checks }));
console.log(`${checks.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
