/** The /login page: a key (password field), an optional name recorded with approvals, and the form's CSRF token. */
import { esc } from "./charts.js";
import { pageShell } from "./html.js";

/** The sign-in form; `error` is a fixed message (never echoes what was typed). */
export function renderLoginPage(o: { csrf: string; next: string; error?: string }): string {
  return pageShell(
    "tidegate — sign in",
    `<h1>Sign in to the plans</h1>
${o.error ? `<p class="warn" role="alert">${esc(o.error)}</p>` : ""}
<form method="post" action="/login" class="login">
<input type="hidden" name="csrf" value="${esc(o.csrf)}"><input type="hidden" name="next" value="${esc(o.next)}">
<p><label>Key<br><input type="password" name="key" autocomplete="current-password" required autofocus size="48"></label></p>
<p><label>Your name (recorded with what you approve; optional)<br><input type="text" name="name" maxlength="64" size="32"></label></p>
<p><button type="submit">Sign in</button></p>
</form>
<p class="muted">An <strong>admin</strong> key can read plans, approve or reject advisory plans and ask for a plan now; a <strong>planner</strong> key can only read.
Keys come from the config (<code>router.adminKeys</code>, <code>router.plannerKeys</code>) or the environment (<code>TIDEGATE_ADMIN_KEYS</code>, <code>TIDEGATE_PLANNER_KEYS</code>); <code>tidegate dev</code> prints its key when it starts.
Scripts can send <code>Authorization: Bearer &lt;key&gt;</code> instead.</p>`,
  );
}
