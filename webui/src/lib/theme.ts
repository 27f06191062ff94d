import { createTheme, localStorageColorSchemeManager } from '@mantine/core';

export const theme = createTheme({
  primaryColor: 'indigo',
  defaultRadius: 'md',
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif',
  fontFamilyMonospace: 'ui-monospace, "DejaVu Sans Mono", monospace',
});

/** The chosen light/dark scheme survives reloads in localStorage under this key. */
export const COLOR_SCHEME_KEY = 'perigee-color-scheme';
export const colorSchemeManager = localStorageColorSchemeManager({ key: COLOR_SCHEME_KEY });
