/* memvisor image info|verify DIR: reading checkpoint images offline. */
#ifndef MV_IMAGE_MAIN_H
#define MV_IMAGE_MAIN_H

int image_main(int argc, char **argv);

#endif
