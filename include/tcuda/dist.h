#ifndef TCUDA_DIST_H
#define TCUDA_DIST_H
#endif
