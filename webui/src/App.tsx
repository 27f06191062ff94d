import { lazy, Suspense } from 'react';
import { Navigate, Route, Routes } from 'react-router-dom';
import { RequireAuth } from './auth/RequireAuth';
import { RequireRole } from './auth/roles';
import { LoadingState } from './components/StateViews';
import { AppLayout } from './layout/AppLayout';

// Every page is its own chunk: the first visit loads only the shell and the page it lands on.
const LoginPage = lazy(() => import('./auth/LoginPage'));
const ChangePasswordPage = lazy(() => import('./auth/ChangePasswordPage'));
const OverviewPage = lazy(() => import('./pages/OverviewPage'));
const FlowsPage = lazy(() => import('./pages/FlowsPage'));
const FlowDetailPage = lazy(() => import('./pages/FlowDetailPage'));
const SitesPage = lazy(() => import('./pages/SitesPage'));
const PolicyPage = lazy(() => import('./pages/PolicyPage'));
const BypassPage = lazy(() => import('./pages/BypassPage'));
const BodPage = lazy(() => import('./pages/BodPage'));
const CachePage = lazy(() => import('./pages/CachePage'));
const DnsPage = lazy(() => import('./pages/DnsPage'));
const HistoryPage = lazy(() => import('./pages/HistoryPage'));
const UsersPage = lazy(() => import('./pages/UsersPage'));
const AuditPage = lazy(() => import('./pages/AuditPage'));
const BackupPage = lazy(() => import('./pages/BackupPage'));
const HealthPage = lazy(() => import('./pages/HealthPage'));
const SystemPage = lazy(() => import('./pages/SystemPage'));
const SetupWizard = lazy(() => import('./pages/SetupWizard'));
const FleetPage = lazy(() => import('./pages/FleetPage'));
const TokensPage = lazy(() => import('./pages/TokensPage'));
const TerminalsPage = lazy(() => import('./pages/TerminalsPage'));
const TerminalDetailPage = lazy(() => import('./pages/TerminalDetailPage'));

export function App() {
  return (
    <Suspense fallback={<LoadingState />}>
      <Routes>
        <Route path="/login" element={<LoginPage />} />
        <Route
          path="/change-password"
          element={
            <RequireAuth allowPasswordChange>
              <ChangePasswordPage />
            </RequireAuth>
          }
        />
        <Route
          element={
            <RequireAuth>
              <AppLayout />
            </RequireAuth>
          }
        >
          <Route index element={<OverviewPage />} />
          <Route path="flows" element={<FlowsPage />} />
          <Route path="flows/:flowId" element={<FlowDetailPage />} />
          <Route path="sites" element={<SitesPage />} />
          <Route path="policy" element={<PolicyPage />} />
          <Route path="bypass" element={<BypassPage />} />
          <Route path="bod" element={<BodPage />} />
          <Route path="cache" element={<CachePage />} />
          <Route path="dns" element={<DnsPage />} />
          <Route path="history" element={<HistoryPage />} />
          <Route path="users" element={<RequireRole role="admin" title="Users and roles"><UsersPage /></RequireRole>} />
          <Route path="audit" element={<RequireRole role="admin" title="Audit log"><AuditPage /></RequireRole>} />
          <Route path="backup" element={<RequireRole role="admin" title="Backup and restore"><BackupPage /></RequireRole>} />
          <Route path="tokens" element={<RequireRole role="operator" title="API tokens"><TokensPage /></RequireRole>} />
          <Route path="fleet" element={<FleetPage />} />
          <Route path="terminals" element={<TerminalsPage />} />
          <Route path="terminals/:name" element={<TerminalDetailPage />} />
          <Route path="health" element={<HealthPage />} />
          <Route path="system" element={<SystemPage />} />
          <Route path="setup" element={<RequireRole role="operator" title="Setup"><SetupWizard /></RequireRole>} />
        </Route>
        <Route path="*" element={<Navigate to="/" replace />} />
      </Routes>
    </Suspense>
  );
}
