import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback } from 'react';
import { ApiError } from '../api/errors';
import { endpoints, type User } from '../api/endpoints';

export const ME_KEY = ['auth', 'me'] as const;
/** Set by a logout, cleared by a login: the next sign-in (maybe another user, another role) starts at the
 * overview instead of returning to the page of the one who left. An expired session keeps its return page. */
export const SIGNED_OUT_KEY = ['auth', 'signed-out'] as const;

/** The signed-in user (null when signed out), plus the session actions. */
export function useAuth() {
  const queryClient = useQueryClient();
  const me = useQuery<User | null>({
    queryKey: ME_KEY,
    queryFn: async () => {
      try {
        return await endpoints.me();
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return null;
        throw e;
      }
    },
    staleTime: 60_000,
  });

  const login = useCallback(
    async (username: string, password: string) => {
      const { user } = await endpoints.login(username, password);
      queryClient.setQueryData(SIGNED_OUT_KEY, false);
      queryClient.setQueryData(ME_KEY, user);
      return user;
    },
    [queryClient],
  );

  const logout = useCallback(async () => {
    try {
      await endpoints.logout();
    } finally {
      // Mounted observers keep watching the "me" query, so update it in place; drop the rest.
      queryClient.setQueryData(SIGNED_OUT_KEY, true);
      queryClient.setQueryData(ME_KEY, null);
      queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== ME_KEY[0] });
    }
  }, [queryClient]);

  return { user: me.data ?? null, isLoading: me.isPending, error: me.error, login, logout, refetch: me.refetch };
}
