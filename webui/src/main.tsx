import '@mantine/core/styles.css';
import './global.css';
import { ColorSchemeScript, MantineProvider } from '@mantine/core';
import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router-dom';
import { App } from './App';
import { queryClient } from './api/query-client';
import { colorSchemeManager, COLOR_SCHEME_KEY, theme } from './lib/theme';

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <ColorSchemeScript localStorageKey={COLOR_SCHEME_KEY} defaultColorScheme="auto" />
    <MantineProvider theme={theme} colorSchemeManager={colorSchemeManager} defaultColorScheme="auto">
      <QueryClientProvider client={queryClient}>
        <BrowserRouter>
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
