import { useQueryClient } from '@tanstack/react-query';
import { useEffect, type ReactNode } from 'react';
import { Navigate, useLocation, useNavigate } from 'react-router-dom';
import { onSessionSignal } from '../api/session-events';
import { ErrorState, LoadingState } from '../components/StateViews';
import { ME_KEY, SIGNED_OUT_KEY, useAuth } from './useAuth';

/**
 * Gate for signed-in pages: sends visitors to /login, and a user who must change the password
 * (a new admin's one-time password) to /change-password before anything else.
 */
export function RequireAuth({ children, allowPasswordChange = false }: { children: ReactNode; allowPasswordChange?: boolean }) {
  const { user, isLoading, error, refetch } = useAuth();
  const location = useLocation();
  const navigate = useNavigate();
  const queryClient = useQueryClient();

  useEffect(
    () =>
      onSessionSignal((signal) => {
        if (signal === 'unauthenticated') queryClient.setQueryData(ME_KEY, null);
        if (signal === 'password_change_required') navigate('/change-password', { replace: true });
      }),
    [navigate, queryClient],
  );

  if (isLoading) return <LoadingState label="Checking session…" />;
  if (error) return <ErrorState error={error} onRetry={() => void refetch()} title="Cannot reach the Perigee API" />;
  if (!user) {
    const leftOnPurpose = queryClient.getQueryData(SIGNED_OUT_KEY) === true;
    return <Navigate to="/login" replace state={leftOnPurpose ? null : { from: location.pathname }} />;
  }
  if (user.must_change_password && !allowPasswordChange) return <Navigate to="/change-password" replace />;
  return <>{children}</>;
}
