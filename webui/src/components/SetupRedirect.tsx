import { useQuery } from '@tanstack/react-query';
import { Navigate, useLocation } from 'react-router-dom';
import { endpoints } from '../api/endpoints';
import { keys } from '../api/keys';
import { useAuth } from '../auth/useAuth';
import { setupNeeded } from '../lib/system-config';

/** A new box (the gateway runs no config, or the factory config unchanged): whoever may configure it lands on the
 * setup wizard, not the overview. Only the landing page redirects, so every other page stays reachable. */
export function SetupRedirect() {
  const { user } = useAuth();
  const location = useLocation();
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  if (location.pathname !== '/' || !user || user.role === 'viewer' || !setupNeeded(running.data)) return null;
  return <Navigate to="/setup" replace />;
}
