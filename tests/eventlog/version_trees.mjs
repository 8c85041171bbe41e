// Reads the version-tree cases (version_trees.json) with the page's own VersionTree
// (static/chat/versions.js) and prints what it shows for each: every turn's versions and the
// branch shown. tests/eventlog/test_version_trees.py compares it with the cases and with the server's reading.
import { readFileSync } from "node:fs";
import { VersionTree } from "../../static/chat/versions.js";

const { cases } = JSON.parse(readFileSync(new URL("./version_trees.json", import.meta.url)));
const read = cases.map(({ heads, view }) => {
  const tree = new VersionTree();
  const turns = heads.map((head) => {
    const turn = { seq: null, place(shown) { this.shown = shown; } };
    tree.place(turn, head);
    return turn;
  });
  if (view !== null) tree.view(view);
  tree.layout(turns);
  const versions = Object.fromEntries(
    turns.map((t) => [t.seq, [t.shown.version, t.shown.versions, t.shown.answerVersion, t.shown.answerVersions]]),
  );
  return { versions, branch: turns.filter((t) => t.shown.shown).map((t) => t.seq) };
});
process.stdout.write(JSON.stringify(read));
