// The console's routes (each a real URL) behind the session check: a page needs a signed-in user
// unless the API is open; /login is reachable always.
import { useEffect, useRef } from "react";
import { Redirect, Route, Switch, useLocation } from "wouter";
import { loginPath } from "./api";
import { ErrorBox, Loading } from "./components/common";
import { Layout } from "./Layout";
import { EventsPage } from "./pages/Events";
import { JobPage, JobsPage } from "./pages/Jobs";
import { LoginPage } from "./pages/Login";
import { PluginsPage } from "./pages/Plugins";
import { PluginVersionPage } from "./pages/PluginVersion";
import { RouteGroupPage, RouteGroupsPage } from "./pages/RouteGroups";
import { SandboxPage } from "./pages/Sandbox";
import { SandboxesPage } from "./pages/Sandboxes";
import { StepPage } from "./pages/Step";
import { SessionProvider, useSession } from "./session";

function Pages() {
  return (
    <Switch>
      <Route path="/"><Redirect to="/sandboxes" replace /></Route>
      <Route path="/sandboxes" component={SandboxesPage} />
      <Route path="/sandboxes/:name/resources/:resource/:phase/:step" component={StepPage} />
      <Route path="/sandboxes/:name" component={SandboxPage} />
      <Route path="/plugins" component={PluginsPage} />
      <Route path="/plugins/:name/:version" component={PluginVersionPage} />
      <Route path="/events" component={EventsPage} />
      <Route path="/routegroups" component={RouteGroupsPage} />
      <Route path="/routegroups/:name" component={RouteGroupPage} />
      <Route path="/jobs" component={JobsPage} />
      <Route path="/jobs/:name" component={JobPage} />
      <Route><h1>Not found</h1><p>No page here. <a href="/sandboxes">Sandboxes</a></p></Route>
    </Switch>
  );
}

function Gate() {
  const { user, error } = useSession();
  const [location] = useLocation();
  // After a move to another page (not on the first), the focus goes to its content, as a page load's would start there.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) { first.current = false; return; }
    document.getElementById("main")?.focus({ preventScroll: true });
  }, [location]);
  if (location === "/login") return <LoginPage />;
  if (user === undefined) return <Layout><Loading /></Layout>;
  if (user === null) {
    if (error) return <Layout><ErrorBox>The console cannot reach its server: {error}</ErrorBox></Layout>;
    return <Redirect to={loginPath()} replace />;
  }
  return <Layout><Pages /></Layout>;
}

export function App() {
  return <SessionProvider><Gate /></SessionProvider>;
}
